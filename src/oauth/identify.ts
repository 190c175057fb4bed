import { hash } from 'node:crypto';
import * as oidc from 'openid-client';
import type { Provider } from './provider.js';
import { ProviderAnswerError } from '../errors.js';
import { traceAsCall } from '../tracing/tracing.js';

/** Who signed in, and the claims /session shows. */
export interface Identity {
  /** The key of the user's token record: {@link openIdUserKey} or {@link plainUserKey}; never shown. */
  userId: string;
  /** The `userIdClaim` value as text: what logs (as a pseudonym) and pages show. */
  user: string;
  claims: Record<string, unknown>;
}

/**
 * The token-record key of an OpenID Connect user: `iss` and `sub` together
 * are the only identifier OpenID Connect Core §5.7 promises to be stable and
 * never reassigned; `email`, `preferred_username` and the like may change or
 * be shared by two accounts, which would then share one record (one's login
 * replacing the other's tokens, one's logout everywhere ending the other's
 * sessions). Hashed, so the store holds no identifier in clear
 * (test/callback/identity-key.test.ts).
 */
export function openIdUserKey(issuer: string, subject: string): string {
  return `oidc.${hash('sha256', JSON.stringify([issuer, subject]), 'base64url')}`;
}

/**
 * The token-record key of a plain OAuth 2.0 user: the userinfo's
 * `userIdClaim` value with its JSON type, so the number 1 and the string "1"
 * are two users (test/provider/plain-oauth.test.ts).
 */
export function plainUserKey(value: string | number): string {
  return `oauth.${hash('sha256', JSON.stringify(value), 'base64url')}`;
}

/** ID token claims that describe the token itself, not the user. */
const TOKEN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash', 'azp'];
const MAX_USER_ID_LENGTH = 512;

/**
 * Identifies the user after the code exchange. With an OpenID provider the
 * record key is the validated ID token's `iss` and `sub`; `userIdClaim` (from
 * the ID token, else userinfo) only names what is shown. Without an issuer
 * (plain OAuth 2.0) only userinfo counts: any JSON object, keyed by its
 * `userIdClaim` value, string or number, type included (README "Storage").
 * @returns undefined when the AS names no usable user id
 */
export async function identify(
  provider: Provider,
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  userIdClaim: string,
  dpop?: oidc.DPoPHandle,
): Promise<Identity | undefined> {
  const configuration = provider.configuration;
  let claims: Record<string, unknown> = {};
  if (provider.isOpenIdProvider && response.id_token !== undefined) {
    claims = { ...response.claims() };
    for (const name of TOKEN_CLAIMS) delete claims[name];
  }
  if (claims[userIdClaim] === undefined && configuration.serverMetadata().userinfo_endpoint !== undefined) {
    const subject = claims.sub;
    claims = { ...claims, ...(await traceAsCall('userinfo', () => fetchUserinfo(provider, response.access_token, subject, dpop))) };
  }
  const shown = claims[userIdClaim];
  if (!isUsableId(shown)) return undefined;
  if (!provider.isOpenIdProvider) return { userId: plainUserKey(shown), user: String(shown), claims };
  const subject = claims.sub;
  if (!isUsableId(subject) || typeof subject !== 'string') return undefined;
  return { userId: openIdUserKey(configuration.serverMetadata().issuer, subject), user: String(shown), claims };
}

function isUsableId(value: unknown): value is string | number {
  return (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) && String(value).length > 0 && String(value).length <= MAX_USER_ID_LENGTH;
}

async function fetchUserinfo(provider: Provider, accessToken: string, subject: unknown, dpop: oidc.DPoPHandle | undefined): Promise<Record<string, unknown>> {
  const configuration = provider.configuration;
  // A DPoP-bound access token is presented with a proof of its key (RFC 9449 §7).
  const options = dpop ? { DPoP: dpop } : undefined;
  if (provider.isOpenIdProvider) {
    // OIDC Core §5.3.4: the userinfo sub must equal the ID token's.
    return oidc.fetchUserInfo(configuration, accessToken, typeof subject === 'string' ? subject : oidc.skipSubjectCheck, options);
  }
  const endpoint = new URL(configuration.serverMetadata().userinfo_endpoint!);
  const response = await oidc.fetchProtectedResource(configuration, accessToken, endpoint, 'GET', undefined, new Headers({ accept: 'application/json' }), options);
  if (!response.ok) throw new ProviderAnswerError('userinfo request failed', response.status);
  const body: unknown = await response.json();
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ProviderAnswerError('userinfo is not a JSON object', 502);
  return body as Record<string, unknown>;
}
