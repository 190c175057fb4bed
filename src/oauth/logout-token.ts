import { constants, createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { Provider } from './provider.js';
import { isLoopbackHost } from '../config/loopback.js';
import { gatehouseError, ProviderAnswerError, type GatehouseError } from '../errors.js';

/** The event a logout token must carry (OpenID Connect Back-Channel Logout 1.0 §2.4). */
export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** A logout token issued longer ago than this is refused; its `jti` is remembered this long plus the skew. */
export const LOGOUT_TOKEN_MAX_AGE_MS = 10 * 60 * 1000;
/** Clock difference tolerated between the authorization server and the gateway. */
export const CLOCK_SKEW_MS = 60 * 1000;
/** A cached JWKS older than this is fetched again before use. */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000;
/** An unknown `kid` refetches the JWKS (key rotation), but not more often than this. */
const JWKS_REFETCH_COOLDOWN_MS = 30 * 1000;
const MAX_TOKEN_LENGTH = 16 * 1024;
/** After a failed JWKS fetch the next one waits this long, doubling per failure up to JWKS_BACKOFF_MAX_MS. */
const JWKS_BACKOFF_MIN_MS = 1000;
const JWKS_BACKOFF_MAX_MS = 60 * 1000;

/**
 * Whether keys may be fetched from `jwksUri`: https, or http on a loopback
 * host (development), as for the provider's own URLs (README
 * "Configuration"). A key set fetched over plain http from another host
 * could be swapped on the way, and with it every logout token accepted.
 */
export function isJwksUriAllowed(jwksUri: string): boolean {
  let url: URL;
  try {
    url = new URL(jwksUri);
  } catch {
    return false;
  }
  return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
}

/** The claims of a logout token that passed every check. */
export interface LogoutClaims {
  iss: string;
  jti: string;
  sub?: string;
  sid?: string;
}

interface Algorithm {
  digest: string | null;
  /** `asymmetricKeyType` the key must have. */
  keyTypes: readonly string[];
  curve?: string;
  pss?: boolean;
}

/**
 * Asymmetric JWS algorithms only (RFC 7518 §3): `none` and the HMAC ones
 * (keyed with the client secret, which the gateway will not accept as proof
 * of the AS's identity) are refused.
 */
const ALGORITHMS: Record<string, Algorithm> = {
  RS256: { digest: 'sha256', keyTypes: ['rsa'] },
  RS384: { digest: 'sha384', keyTypes: ['rsa'] },
  RS512: { digest: 'sha512', keyTypes: ['rsa'] },
  PS256: { digest: 'sha256', keyTypes: ['rsa', 'rsa-pss'], pss: true },
  PS384: { digest: 'sha384', keyTypes: ['rsa', 'rsa-pss'], pss: true },
  PS512: { digest: 'sha512', keyTypes: ['rsa', 'rsa-pss'], pss: true },
  ES256: { digest: 'sha256', keyTypes: ['ec'], curve: 'prime256v1' },
  ES384: { digest: 'sha384', keyTypes: ['ec'], curve: 'secp384r1' },
  ES512: { digest: 'sha512', keyTypes: ['ec'], curve: 'secp521r1' },
  EdDSA: { digest: null, keyTypes: ['ed25519', 'ed448'] },
  Ed25519: { digest: null, keyTypes: ['ed25519'] },
};

interface PublicJwk {
  kid?: string;
  alg?: string;
  use?: string;
  key: KeyObject;
}

/**
 * Validates OpenID Connect Back-Channel Logout 1.0 logout tokens (§2.6):
 * the JWS signature against the authorization server's JWKS (fetched from
 * the discovered `jwks_uri` and cached), `iss`, `aud`, `iat`, `exp` when
 * present, `events`, `sub` or `sid`, no `nonce`, a `jti`. Replay of the
 * `jti` is the caller's check, done once the rest has passed, so that an
 * invalid token cannot use up a `jti`.
 *
 * Only node:crypto is used: oauth4webapi's JWT validation is tied to ID
 * tokens and RFC 9068 access tokens, whose required claims differ.
 *
 * @example
 * const verifier = new LogoutTokenVerifier(provider, config.provider.clientId, 10_000);
 * const claims = await verifier.verify(body.get('logout_token')); // throws GH_ERR_LOGOUT_TOKEN_INVALID
 */
export class LogoutTokenVerifier {
  readonly #provider: Provider;
  readonly #clientId: string;
  readonly #timeoutMs: number;
  readonly #clock: () => number;
  #keys: PublicJwk[] = [];
  /** When the keys were last fetched (or a fetch last attempted): the age and refetch cooldown count from it. */
  #fetchedAt = -Infinity;
  #fetching: Promise<void> | undefined;
  /** No fetch before this time after failures (a JWKS outage must not turn every logout token into a fetch). */
  #retryAt = -Infinity;
  #failures = 0;

  /** @param clock the gateway's time: when JWKS fetches happen (the cache, the backoff) and what `iat` and `exp` are checked against. */
  constructor(provider: Provider, clientId: string, timeoutMs: number, clock: () => number = Date.now) {
    this.#provider = provider;
    this.#clientId = clientId;
    this.#timeoutMs = timeoutMs;
    this.#clock = clock;
  }

  /**
   * The token's claims when it is a valid logout token for this client.
   * @throws GH_ERR_LOGOUT_TOKEN_INVALID (400) naming the first failed check;
   *   GH_ERR_PROVIDER_UNAVAILABLE (503) when the JWKS cannot be fetched.
   */
  async verify(token: string, now = this.#clock()): Promise<LogoutClaims> {
    const metadata = this.#provider.configuration.serverMetadata();
    if (!this.#provider.isOpenIdProvider || metadata.jwks_uri === undefined) throw invalid('the authorization server publishes no signing keys (jwks_uri)');
    if (token.length > MAX_TOKEN_LENGTH) throw invalid('it is too long');
    const parts = token.split('.');
    if (parts.length !== 3) throw invalid('it is not a signed JWT (JWS compact serialization)');
    const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
    const header = decodeJson(encodedHeader, 'header');
    const claims = decodeJson(encodedPayload, 'payload');

    const alg = header.alg;
    if (typeof alg !== 'string' || ALGORITHMS[alg] === undefined) throw invalid('its signing algorithm is not accepted');
    if (header.crit !== undefined) throw invalid('it has critical header parameters');
    if (header.typ !== undefined && !isLogoutType(header.typ)) throw invalid('its typ is not logout+jwt');
    const kid = typeof header.kid === 'string' ? header.kid : undefined;
    const signingInput = Buffer.from(`${encodedHeader}.${encodedPayload}`);
    const signature = Buffer.from(encodedSignature, 'base64url');
    if (!(await this.#verifySignature(metadata.jwks_uri, alg, kid, signingInput, signature))) throw invalid('its signature does not verify');

    checkClaims(claims, metadata.issuer, this.#clientId, now);
    return {
      iss: claims.iss as string,
      jti: claims.jti as string,
      ...(typeof claims.sub === 'string' ? { sub: claims.sub } : {}),
      ...(typeof claims.sid === 'string' ? { sid: claims.sid } : {}),
    };
  }

  /**
   * Keys older than JWKS_MAX_AGE_MS, or none matching the token's `kid`
   * (rotation), are fetched again; while the AS's JWKS cannot be fetched the
   * keys already held keep serving, and fetches back off (1 s doubling to
   * 60 s) instead of following every token (test/lifecycle/backchannel-jwks.test.ts).
   */
  async #verifySignature(jwksUri: string, alg: string, kid: string | undefined, input: Buffer, signature: Buffer): Promise<boolean> {
    const now = this.#clock();
    if (now - this.#fetchedAt > JWKS_MAX_AGE_MS) await this.#refresh(jwksUri, this.#keys.length > 0);
    let candidates = this.#candidates(alg, kid);
    if (candidates.length === 0 && this.#clock() - this.#fetchedAt > JWKS_REFETCH_COOLDOWN_MS) {
      await this.#refresh(jwksUri, true);
      candidates = this.#candidates(alg, kid);
    }
    return candidates.some((jwk) => verifyWith(alg, jwk.key, input, signature));
  }

  #candidates(alg: string, kid: string | undefined): PublicJwk[] {
    const { keyTypes, curve } = ALGORITHMS[alg]!;
    return this.#keys.filter(
      (jwk) =>
        (kid === undefined || jwk.kid === kid) &&
        (jwk.alg === undefined || jwk.alg === alg) &&
        (jwk.use === undefined || jwk.use === 'sig') &&
        keyTypes.includes(jwk.key.asymmetricKeyType ?? '') &&
        (curve === undefined || jwk.key.asymmetricKeyDetails?.namedCurve === curve),
    );
  }

  /**
   * One JWKS fetch at a time; concurrent callers share it. A failure (or a
   * fetch skipped while backing off) throws GH_ERR_PROVIDER_UNAVAILABLE,
   * unless `keepOnFailure`: then the keys held stay in use.
   */
  async #refresh(jwksUri: string, keepOnFailure: boolean): Promise<void> {
    if (this.#clock() < this.#retryAt) {
      if (keepOnFailure) return;
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: new Error('jwks_uri failed recently: backing off') });
    }
    this.#fetching ??= this.#fetch(jwksUri)
      .then(
        () => {
          this.#failures = 0;
          this.#retryAt = -Infinity;
        },
        (err: unknown) => {
          this.#failures += 1;
          this.#retryAt = this.#clock() + Math.min(JWKS_BACKOFF_MIN_MS * 2 ** (this.#failures - 1), JWKS_BACKOFF_MAX_MS);
          throw err;
        },
      )
      .finally(() => {
        this.#fetching = undefined;
      });
    try {
      await this.#fetching;
    } catch (err) {
      if (!keepOnFailure) throw err;
    }
  }

  async #fetch(jwksUri: string): Promise<void> {
    if (!isJwksUriAllowed(jwksUri)) {
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: new Error('jwks_uri must be https (http only on a loopback host)') });
    }
    let body: unknown;
    try {
      const response = await fetch(jwksUri, {
        headers: { accept: 'application/jwk-set+json, application/json' },
        redirect: 'error',
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      if (!response.ok) throw new ProviderAnswerError('jwks_uri did not answer 200', response.status);
      body = await response.json();
    } catch (cause) {
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause });
    }
    const keys = (body as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(keys)) throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: new TypeError('jwks_uri answered no keys array') });
    this.#keys = keys.flatMap(importPublicJwk);
    this.#fetchedAt = this.#clock();
  }
}

function checkClaims(claims: Record<string, unknown>, issuer: string, clientId: string, now: number): void {
  if (claims.iss !== issuer) throw invalid('its iss is not the issuer');
  const aud = claims.aud;
  if (!(aud === clientId || (Array.isArray(aud) && aud.includes(clientId)))) throw invalid('its aud does not name this client');
  const iat = claims.iat;
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw invalid('it has no iat');
  if (iat * 1000 > now + CLOCK_SKEW_MS) throw invalid('its iat is in the future');
  if (iat * 1000 < now - LOGOUT_TOKEN_MAX_AGE_MS) throw invalid('it was issued too long ago (iat)');
  // exp is required by the final specification but absent from older servers' tokens; checked when present.
  if (claims.exp !== undefined && (typeof claims.exp !== 'number' || claims.exp * 1000 <= now - CLOCK_SKEW_MS)) throw invalid('it has expired (exp)');
  const events = claims.events;
  if (!isObject(events) || !isObject(events[BACKCHANNEL_LOGOUT_EVENT])) throw invalid(`its events claim has no ${BACKCHANNEL_LOGOUT_EVENT} object`);
  const hasSub = typeof claims.sub === 'string' && claims.sub.length > 0;
  const hasSid = typeof claims.sid === 'string' && claims.sid.length > 0;
  if ((claims.sub !== undefined && !hasSub) || (claims.sid !== undefined && !hasSid) || !(hasSub || hasSid)) throw invalid('it names neither a sub nor a sid');
  // §2.4: a nonce would let an ID token pass as a logout token.
  if (claims.nonce !== undefined) throw invalid('it carries a nonce');
  if (typeof claims.jti !== 'string' || claims.jti.length === 0) throw invalid('it has no jti');
}

function verifyWith(alg: string, key: KeyObject, input: Buffer, signature: Buffer): boolean {
  const { digest, pss, curve } = ALGORITHMS[alg]!;
  try {
    if (pss) return verify(digest, input, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }, signature);
    if (curve !== undefined) return verify(digest, input, { key, dsaEncoding: 'ieee-p1363' }, signature);
    return verify(digest, input, key, signature);
  } catch {
    return false;
  }
}

/** A JWKS entry as a public KeyObject; entries that are not public signing keys are skipped. */
function importPublicJwk(entry: unknown): PublicJwk[] {
  if (!isObject(entry) || typeof entry.kty !== 'string' || entry.kty === 'oct' || entry.d !== undefined) return [];
  try {
    const key = createPublicKey({ key: entry as import('node:crypto').JsonWebKey, format: 'jwk' });
    return [
      {
        key,
        ...(typeof entry.kid === 'string' ? { kid: entry.kid } : {}),
        ...(typeof entry.alg === 'string' ? { alg: entry.alg } : {}),
        ...(typeof entry.use === 'string' ? { use: entry.use } : {}),
      },
    ];
  } catch {
    return [];
  }
}

/**
 * The `iss` a logout token claims, read before any check and trusted for
 * nothing but picking the provider whose keys and client then verify it
 * (README "Several identity providers"); undefined when it cannot be read.
 */
export function claimedIssuer(token: string): string | undefined {
  const parts = token.length > MAX_TOKEN_LENGTH ? [] : token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const { iss } = decodeJson(parts[1]!, 'payload');
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

function decodeJson(part: string, name: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    throw invalid(`its ${name} is not base64url JSON`);
  }
  if (!isObject(value)) throw invalid(`its ${name} is not a JSON object`);
  return value;
}

/** RFC 8417 / Back-Channel Logout §2.4 explicit typing, with or without the `application/` prefix. */
function isLogoutType(typ: unknown): boolean {
  if (typeof typ !== 'string') return false;
  const type = typ.toLowerCase();
  return type === 'logout+jwt' || type === 'application/logout+jwt' || type === 'jwt';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function invalid(detail: string): GatehouseError {
  return gatehouseError('GH_ERR_LOGOUT_TOKEN_INVALID', { detail });
}
