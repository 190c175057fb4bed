import { createPrivateKey } from 'node:crypto';
import type { Config } from '../schema.js';
import { isLoopbackHost } from '../loopback.js';
import { parseUrl, type Rule } from './rule.js';
import { RESERVED_HEADERS } from './routes.js';

/** The shortest `admin.token`: a guessable bearer would let anyone on the admin network end every session. */
export const ADMIN_TOKEN_MIN_LENGTH = 32;
/** An assertion outliving this could not be taken back by ending the session (README "Identity assertion"). */
export const ASSERTION_MAX_LIFETIME_S = 3600;

/**
 * What a signing key is, or why it cannot sign assertions: a PKCS#8 PEM
 * private key, EC P-256 (ES256) or Ed25519 (EdDSA), the algorithms every JWT
 * library an upstream may use verifies. The key itself is never quoted.
 */
export function inspectSigningKey(pem: string): { alg: 'ES256' | 'EdDSA' } | { problem: string } {
  if (!pem.includes('-----BEGIN PRIVATE KEY-----')) {
    return { problem: 'must be an unencrypted PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----); convert with: openssl pkcs8 -topk8 -nocrypt -in key.pem' };
  }
  let key;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    return { problem: 'is not a readable PKCS#8 PEM private key' };
  }
  if (key.asymmetricKeyType === 'ed25519') return { alg: 'EdDSA' };
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return { alg: 'ES256' };
  const kind = key.asymmetricKeyType === 'ec' ? `an EC ${key.asymmetricKeyDetails?.namedCurve ?? ''} key` : `a ${key.asymmetricKeyType ?? 'different'} key`;
  return { problem: `is ${kind}; it must be EC P-256 (ES256) or Ed25519 (EdDSA) (generate one with: openssl genpkey -algorithm ed25519)` };
}

/**
 * The rules of identity assertions, the session API and security events
 * (README "Identity assertion", "Ending sessions"): one `key: what is wrong`
 * line per problem.
 */
function identityProblems(config: Config): string[] {
  const problems: string[] = [];
  const { assertion, admin, securityEvents } = config;
  assertion.signingKeys?.forEach((pem, index) => {
    const inspected = inspectSigningKey(pem);
    if ('problem' in inspected) problems.push(`assertion.signingKeys[${index}]: ${inspected.problem}`);
  });
  if (assertion.lifetime === 0) problems.push('assertion.lifetime: must be greater than 0');
  if (assertion.lifetime > ASSERTION_MAX_LIFETIME_S) problems.push('assertion.lifetime: must be at most 1h (an assertion cannot be taken back once sent)');
  (config.routes ?? []).forEach((route, index) => {
    if (route.assertion === undefined) return;
    const key = `routes[${index}].assertion`;
    if (assertion.signingKeys === undefined) problems.push(`${key}: needs assertion.signingKeys (the keys that sign assertions)`);
    if (route.auth === 'public') problems.push(`${key}: a public route has no user to assert; use auth: optional or required`);
    const header = route.assertion.header.toLowerCase();
    if (RESERVED_HEADERS.has(header)) problems.push(`${key}.header: the gateway sets ${route.assertion.header} itself; name another (e.g. X-Gatehouse-Assertion)`);
    if (Object.keys(route.headers).some((name) => name.toLowerCase() === header)) problems.push(`${key}.header: ${route.assertion.header} is also one of the route's identity headers`);
  });
  if (admin.token !== undefined && admin.token.length < ADMIN_TOKEN_MIN_LENGTH) {
    problems.push(`admin.token: must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters (generate one with: openssl rand -base64 32)`);
  }
  const given = (['issuer', 'audience', 'jwksUri'] as const).filter((name) => securityEvents[name] !== undefined);
  if (given.length > 0 && given.length < 3) {
    for (const name of ['issuer', 'audience', 'jwksUri'] as const) {
      if (securityEvents[name] === undefined) problems.push(`securityEvents.${name}: required with securityEvents.${given[0]} (issuer, audience and jwksUri go together)`);
    }
  }
  if (securityEvents.jwksUri !== undefined) {
    const url = parseUrl(securityEvents.jwksUri);
    if (!url || !['http:', 'https:'].includes(url.protocol)) problems.push('securityEvents.jwksUri: must be an absolute https URL');
    else if (url.protocol !== 'https:' && !isLoopbackHost(url.hostname)) {
      problems.push('securityEvents.jwksUri: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])');
    }
  }
  return problems;
}

/** Identity assertions, the session API, security events. */
export const IDENTITY_RULES: readonly Rule[] = [{ reads: [], check: identityProblems }];
