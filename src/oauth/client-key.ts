import { createPrivateKey, webcrypto } from 'node:crypto';
import * as oidc from 'openid-client';
import { inspectClientKey, type ClientKeyAlgorithm } from '../config/client-key.js';

/**
 * The algorithm for an assertion to this authorization server: ES256 for an
 * EC key; for an RSA key RS256, or PS256 when the server's metadata lists
 * PS256 and not RS256 (FAPI 2.0 servers often allow only PS256 and ES256).
 */
export function assertionAlgorithm(algorithms: readonly ClientKeyAlgorithm[], supported: readonly string[] | undefined): ClientKeyAlgorithm {
  if (algorithms.includes('ES256')) return 'ES256';
  return supported !== undefined && supported.includes('PS256') && !supported.includes('RS256') ? 'PS256' : 'RS256';
}

const WEBCRYPTO_ALGORITHMS = {
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  PS256: { name: 'RSA-PSS', hash: 'SHA-256' },
} as const;

/**
 * `private_key_jwt` client authentication (RFC 7523 §2.2, OpenID Connect Core
 * §9): openid-client signs a fresh assertion for every token, revocation and
 * pushed authorization request. The key is imported once per algorithm as a
 * non-extractable CryptoKey, so nothing can read it back out to a log.
 * @param pem a key `inspectClientKey` accepted (config validation ran first)
 * @param kid `provider.privateKeyId`, the `kid` the server registered
 */
export function privateKeyJwt(pem: string, kid: string | undefined): oidc.ClientAuth {
  const inspected = inspectClientKey(pem);
  if ('problem' in inspected) throw new TypeError(`provider.privateKey ${inspected.problem}`);
  const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
  const byAlgorithm = new Map<ClientKeyAlgorithm, Promise<oidc.ClientAuth>>();
  const authFor = (alg: ClientKeyAlgorithm): Promise<oidc.ClientAuth> => {
    let auth = byAlgorithm.get(alg);
    if (!auth) {
      auth = webcrypto.subtle
        .importKey('pkcs8', der, WEBCRYPTO_ALGORITHMS[alg], false, ['sign'])
        .then((key) => oidc.PrivateKeyJwt(kid === undefined ? key : { key, kid }));
      byAlgorithm.set(alg, auth);
    }
    return auth;
  };
  // openid-client awaits client authentication (PrivateKeyJwt signs asynchronously), though its type says void.
  const authenticate = async (...args: Parameters<oidc.ClientAuth>): Promise<void> => {
    const alg = assertionAlgorithm(inspected.algorithms, args[0].token_endpoint_auth_signing_alg_values_supported);
    const sign = (await authFor(alg)) as (...signArgs: Parameters<oidc.ClientAuth>) => Promise<void>;
    await sign(...args);
  };
  return authenticate as unknown as oidc.ClientAuth;
}
