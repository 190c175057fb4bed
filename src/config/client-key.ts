import { createPrivateKey, type KeyObject } from 'node:crypto';

/** The JWS algorithms a `provider.privateKey` can sign client assertions with (README "Client authentication"). */
export type ClientKeyAlgorithm = 'ES256' | 'RS256' | 'PS256';

const MIN_RSA_BITS = 2048;

/**
 * What `provider.privateKey` is: the algorithms it can sign with, or why it
 * cannot be used. An EC key must be on P-256 (ES256); an RSA key needs at
 * least 2048 bits (RFC 7518 §3.3) and signs RS256 or PS256. A PEM that does
 * not parse (an encrypted one included) or a public key is refused, so that
 * `check` fails rather than the first sign-in.
 * @example inspectClientKey(pem) // { algorithms: ['ES256'] } for an EC P-256 key
 */
export function inspectClientKey(pem: string): { algorithms: ClientKeyAlgorithm[] } | { problem: string } {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    return { problem: 'does not parse as an unencrypted PEM private key (PKCS#8: -----BEGIN PRIVATE KEY-----)' };
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'prime256v1') return { algorithms: ['ES256'] };
  if (key.asymmetricKeyType === 'rsa' && (details.modulusLength ?? 0) >= MIN_RSA_BITS) return { algorithms: ['RS256', 'PS256'] };
  const found = key.asymmetricKeyType === 'ec' ? `an EC key on ${details.namedCurve}` : `a ${key.asymmetricKeyType} key`;
  if (key.asymmetricKeyType === 'rsa') return { problem: `is an RSA key of ${details.modulusLength} bits: RS256 and PS256 need at least ${MIN_RSA_BITS}` };
  return { problem: `is ${found}: it must be an EC P-256 key (ES256) or an RSA key (RS256, PS256)` };
}
