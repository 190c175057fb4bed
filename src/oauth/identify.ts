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
export function plainUserKey(value: string | number, provider = 'default'): string {
  // A plain OAuth 2.0 server has no issuer to tell its users apart from another's: a named provider's name does
  // (README "Several identity providers"); the default provider's keys stay as they always were.
  const named = provider === 'default' ? JSON.stringify(value) : JSON.stringify([provider, value]);
  return `oauth.${hash('sha256', named, 'base64url')}`;
}

/** ID token claims that describe the token itself, not the user. */
const TOKEN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash', 'azp'];
const MAX_USER_ID_LENGTH = 512;

/**
 * The authorization server answered for another user than the one signed in:
 * a userinfo `sub` other than the ID token's (OpenID Connect Core §5.3.2), a
 * refreshed ID token with another `sub` (§12.2), or, from a plain OAuth 2.0
 * server, a userinfo naming another user. The sign-in fails; after a refresh
 * the user's sessions end.
 */
export class SubjectMismatchError extends Error {
  constructor(what: string) {
    super(`${what} names another user than the one signed in`);
    this.name = 'SubjectMismatchError';
  }
}

/**
 * Identifies the user after the code exchange. With an OpenID provider the
 * record key is the validated ID token's `iss` and `sub`; `userIdClaim` only
 * names what is shown. The claims are the ID token's merged with userinfo
 * whenever the provider has a userinfo endpoint (README "Routes", `allow`):
 * a conformant provider puts profile, email and group claims there, not in
 * the ID token, when it issues an access token (OpenID Connect Core §5.4).
 * Without an issuer (plain OAuth 2.0) only userinfo counts: any JSON object,
 * keyed by its `userIdClaim` value, string or number, type included (README
 * "Storage").
 * @returns undefined when the AS names no usable user id
 * @throws SubjectMismatchError when userinfo's `sub` is not the ID token's
 */
export async function identify(
  provider: Provider,
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  userIdClaim: string,
  dpop?: oidc.DPoPHandle,
): Promise<Identity | undefined> {
  const fromIdToken = provider.isOpenIdProvider && response.id_token !== undefined ? userClaims(response.claims()!) : {};
  const claims = await withUserinfo(provider, response.access_token, fromIdToken, dpop);
  const shown = claims[userIdClaim];
  if (!isUsableId(shown)) return undefined;
  if (!provider.isOpenIdProvider) return { userId: plainUserKey(shown, provider.name), user: String(shown), claims };
  const subject = claims.sub;
  if (!isUsableId(subject) || typeof subject !== 'string') return undefined;
  return { userId: openIdUserKey(provider.configuration.serverMetadata().issuer, subject), user: String(shown), claims };
}

/** What a refresh changes about who the user is: the claims, and the `userIdClaim` value shown. */
export interface RefreshedIdentity {
  claims: Record<string, unknown>;
  /** Undefined when the claims no longer hold a usable `userIdClaim` value (the shown name is then kept). */
  user: string | undefined;
}

/**
 * The user's claims after a refresh that issued a new access token: the new
 * ID token's claims, or without one the stored ID token's (RFC 6749 §6 lets
 * a refresh response leave it out), merged with userinfo fetched with the
 * new access token whenever the provider has a userinfo endpoint; so a group
 * taken away at the provider is gone at the next refresh. Without a userinfo
 * endpoint and without a new ID token the claims stay as they were.
 * @param stored the record being refreshed: its key, ID token and claims
 * @throws SubjectMismatchError when the new ID token or userinfo names another user
 */
export async function refreshedIdentity(
  provider: Provider,
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  stored: { userId: string; idToken?: string | undefined; claims: Record<string, unknown> },
  userIdClaim: string,
  dpop?: oidc.DPoPHandle,
): Promise<RefreshedIdentity> {
  const hasUserinfo = provider.configuration.serverMetadata().userinfo_endpoint !== undefined;
  let fromIdToken: Record<string, unknown>;
  if (provider.isOpenIdProvider && response.id_token !== undefined) {
    fromIdToken = userClaims(response.claims()!);
    // OpenID Connect Core §12.2: a refreshed ID token's sub is the original one's.
    if (stored.claims.sub !== undefined && fromIdToken.sub !== stored.claims.sub) throw new SubjectMismatchError('the refreshed ID token');
  } else if (!hasUserinfo) {
    return { claims: stored.claims, user: shownUser(stored.claims, userIdClaim) };
  } else {
    fromIdToken = provider.isOpenIdProvider ? storedIdTokenClaims(stored) : {};
  }
  const claims = await withUserinfo(provider, response.access_token, fromIdToken, dpop);
  if (!provider.isOpenIdProvider) {
    const shown = claims[userIdClaim];
    if (!isUsableId(shown) || plainUserKey(shown, provider.name) !== stored.userId) throw new SubjectMismatchError('userinfo');
  }
  return { claims, user: shownUser(claims, userIdClaim) };
}

/**
 * `claims` merged with userinfo when the provider has a userinfo endpoint
 * (a claim present in either source counts; userinfo, the fresher answer,
 * wins where both have one). With an OpenID provider userinfo's `sub` must
 * equal the ID token's (OpenID Connect Core §5.3.2).
 */
async function withUserinfo(provider: Provider, accessToken: string, claims: Record<string, unknown>, dpop: oidc.DPoPHandle | undefined): Promise<Record<string, unknown>> {
  if (provider.configuration.serverMetadata().userinfo_endpoint === undefined) return claims;
  const userinfo = await traceAsCall('userinfo', () => fetchUserinfo(provider, accessToken, dpop));
  if (provider.isOpenIdProvider && claims.sub !== undefined && userinfo.sub !== claims.sub) throw new SubjectMismatchError('userinfo');
  return { ...claims, ...userinfo };
}

/** A validated ID token's claims without those that describe the token itself. */
function userClaims(claims: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...claims };
  for (const name of TOKEN_CLAIMS) delete copy[name];
  return copy;
}

/**
 * The claims of the ID token kept in the record, validated when it was
 * issued; the record's claims when it holds none (then only their `sub`,
 * which the next userinfo must match, and nothing userinfo may have removed).
 */
function storedIdTokenClaims(stored: { idToken?: string | undefined; claims: Record<string, unknown> }): Record<string, unknown> {
  const payload = stored.idToken?.split('.')[1];
  if (payload !== undefined) {
    try {
      const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      if (typeof claims === 'object' && claims !== null && !Array.isArray(claims)) return userClaims(claims as Record<string, unknown>);
    } catch {
      // Not a JWS: fall through to the sub alone.
    }
  }
  return stored.claims.sub === undefined ? {} : { sub: stored.claims.sub };
}

function shownUser(claims: Record<string, unknown>, userIdClaim: string): string | undefined {
  const shown = claims[userIdClaim];
  return isUsableId(shown) ? String(shown) : undefined;
}

function isUsableId(value: unknown): value is string | number {
  return (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) && String(value).length > 0 && String(value).length <= MAX_USER_ID_LENGTH;
}

async function fetchUserinfo(provider: Provider, accessToken: string, dpop: oidc.DPoPHandle | undefined): Promise<Record<string, unknown>> {
  const configuration = provider.configuration;
  // A DPoP-bound access token is presented with a proof of its key (RFC 9449 §7).
  const options = dpop ? { DPoP: dpop } : undefined;
  if (provider.isOpenIdProvider) {
    // The sub is compared by the caller (withUserinfo), which knows which ID token's it must be.
    return oidc.fetchUserInfo(configuration, accessToken, oidc.skipSubjectCheck, options);
  }
  const endpoint = new URL(configuration.serverMetadata().userinfo_endpoint!);
  const response = await oidc.fetchProtectedResource(configuration, accessToken, endpoint, 'GET', undefined, new Headers({ accept: 'application/json' }), options);
  if (!response.ok) throw new ProviderAnswerError('userinfo request failed', response.status);
  const body: unknown = await response.json();
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ProviderAnswerError('userinfo is not a JSON object', 502);
  return body as Record<string, unknown>;
}
