import { decodeJwt, jwtVerify, type JWTPayload } from 'jose';
import * as oidc from 'openid-client';
import { LRUCache } from 'lru-cache';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Clock } from '../clock.js';
import { gatehouseError, isGatehouseError, type GatehouseError } from '../errors.js';
import { sha256Base64url } from '../hash.js';
import { describeFailure } from '../oauth/provider.js';
import { IssuerKeys } from './issuer-keys.js';

/** Seconds of clock difference allowed on a JWT's `exp` and `nbf` (README "Machine clients"). */
export const BEARER_LEEWAY_S = 60;

/**
 * The JWS algorithms a machine client's JWT may be signed with: asymmetric
 * only. `none` carries no signature, and an HMAC token "signed" with an
 * issuer's public key as the secret would verify against that public key
 * (RFC 8725 §2.1, §3.1).
 */
const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

/** jose's codes for a key set that could not be fetched or read: the token may be fine, the gateway cannot tell (503). */
const UNAVAILABLE_JOSE_CODES: ReadonlySet<string> = new Set(['ERR_JOSE_GENERIC', 'ERR_JWKS_INVALID', 'ERR_JWKS_TIMEOUT']);

/**
 * A machine client admitted by its own bearer token: a user of the route
 * without a session (no cookie, no refresh, no CSRF rule).
 */
export interface MachineCaller {
  /** The caller as shown (logs as a pseudonym, the 403 body): its `userIdClaim` value. */
  user: string;
  /** Whose requests count together toward `limits.perUserConcurrency`: the issuer and the caller. */
  key: string;
  /** What `allow` and the identity headers read: the JWT's claims, or the introspection answer. */
  claims: Readonly<Record<string, unknown>>;
  /** Epoch milliseconds until which this verdict is reused: at most `cacheTtl` on, never past the token's `exp`. */
  until: number;
}

/** A cached verdict: the caller, or null for a token the AS called inactive. */
interface Verdict {
  caller: MachineCaller | null;
  until: number;
}

/** What the verifier needs of the gateway. */
export interface BearerVerifierOptions {
  settings: Config['machineClients'];
  /** The gateway's own client at `provider` (introspection authenticates as it); `configuration` throws 503 before discovery. */
  provider: { readonly configuration: oidc.Configuration };
  /** `provider.userIdClaim`: who an introspected token's caller is (then `sub`, then `client_id`). */
  providerUserIdClaim: string;
  /** Milliseconds each fetch of a key set or discovery document may take. */
  timeoutMs: number;
  /** Most verdicts kept at once. */
  cacheSize: number;
  clock: Clock;
  /** Milliseconds between key-set fetches an unknown `kid` may cause (default one minute; tests shorten it). */
  jwksCooldownMs?: number;
}

/**
 * Verifies machine clients' bearer tokens (README "Machine clients"). A JWT
 * whose `iss` is one of `machineClients.issuers` is verified locally: its
 * signature with a key of that issuer's JWKS (asymmetric algorithms only),
 * `aud` against the issuer's `audiences`, `exp` and `nbf` with
 * {@link BEARER_LEEWAY_S} of leeway. Any other token goes to the provider's
 * introspection endpoint (RFC 7662) when `introspection` is on. Verdicts
 * are cached under the SHA-256 of the token (the token itself is never
 * kept), for at most `cacheTtl` and never past the token's `exp`, so a
 * busy caller costs one lookup per request and at most one introspection
 * per `cacheTtl`.
 *
 * @example
 * const hash = tokenHash(token);
 * const caller = verifier.peek(hash, now) ?? (await verifier.verify(token, hash, request.log));
 */
export class BearerVerifier {
  readonly #issuers: ReadonlyMap<string, { settings: Config['machineClients']['issuers'][number]; keys: IssuerKeys }>;
  readonly #options: BearerVerifierOptions;
  readonly #ttlMs: number;
  readonly #verdicts: LRUCache<string, Verdict>;
  /** Introspections under way by token hash: concurrent requests with one token wait for one answer. */
  readonly #introspecting = new Map<string, Promise<MachineCaller>>();

  constructor(options: BearerVerifierOptions) {
    this.#options = options;
    this.#ttlMs = options.settings.cacheTtl * 1000;
    this.#verdicts = new LRUCache({ max: options.cacheSize });
    this.#issuers = new Map(
      options.settings.issuers.map((settings) => [
        settings.issuer,
        { settings, keys: new IssuerKeys(settings, { timeoutMs: options.timeoutMs, ...(options.jwksCooldownMs === undefined ? {} : { cooldownMs: options.jwksCooldownMs }) }) },
      ]),
    );
  }

  /** The cached caller of an accepted token, without a promise (the hot path); undefined when the token must be verified. */
  peek(hash: string, now: number): MachineCaller | undefined {
    const verdict = this.#verdicts.get(hash);
    return verdict !== undefined && verdict.caller !== null && verdict.until > now ? verdict.caller : undefined;
  }

  /**
   * The caller of `token` (its {@link tokenHash} is `hash`). Throws
   * GH_ERR_BEARER_INVALID (401) for a token that fails any check, and
   * GH_ERR_BEARER_UNAVAILABLE (503) when the issuer's keys, its discovery
   * document or the introspection endpoint cannot be reached.
   */
  async verify(token: string, hash: string, log: FastifyBaseLogger): Promise<MachineCaller> {
    const now = this.#options.clock.now();
    const verdict = this.#verdicts.get(hash);
    if (verdict !== undefined && verdict.until > now) {
      if (verdict.caller !== null) return verdict.caller;
      throw invalid(log, 'inactive (cached)');
    }
    let payload: JWTPayload | undefined;
    try {
      payload = decodeJwt(token);
    } catch {
      payload = undefined;
    }
    const issuer = typeof payload?.iss === 'string' ? this.#issuers.get(payload.iss) : undefined;
    if (issuer !== undefined) return this.#verifyJwt(token, hash, issuer, now, log);
    if (this.#options.settings.introspection) return this.#introspectOnce(token, hash, log);
    throw invalid(log, payload === undefined ? 'not a JWT' : 'issuer not configured');
  }

  async #verifyJwt(
    token: string,
    hash: string,
    issuer: { settings: Config['machineClients']['issuers'][number]; keys: IssuerKeys },
    now: number,
    log: FastifyBaseLogger,
  ): Promise<MachineCaller> {
    const { settings } = issuer;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, issuer.keys.getKey, {
        issuer: settings.issuer,
        audience: settings.audiences,
        algorithms: ASYMMETRIC_ALGORITHMS,
        clockTolerance: BEARER_LEEWAY_S,
        currentDate: new Date(now),
        // A token without exp would be good forever.
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      if (isGatehouseError(err)) throw unavailable(log, err, settings.issuer);
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'string' && UNAVAILABLE_JOSE_CODES.has(code)) throw unavailable(log, gatehouseError('GH_ERR_BEARER_UNAVAILABLE', { cause: err }), settings.issuer);
      throw invalid(log, typeof code === 'string' ? code : 'unverifiable', settings.issuer);
    }
    const user = claimText(payload[settings.userIdClaim]);
    if (user === undefined) throw invalid(log, `no ${settings.userIdClaim} claim`, settings.issuer);
    const caller: MachineCaller = { user, key: `${settings.issuer} ${user}`, claims: payload, until: this.#until(now, payload.exp) };
    this.#remember(hash, caller, caller.until);
    return caller;
  }

  /** One introspection per token at a time: a burst of requests with a new token waits for the first one's answer. */
  #introspectOnce(token: string, hash: string, log: FastifyBaseLogger): Promise<MachineCaller> {
    let pending = this.#introspecting.get(hash);
    if (pending === undefined) {
      pending = this.#introspect(token, hash, log).finally(() => this.#introspecting.delete(hash));
      this.#introspecting.set(hash, pending);
    }
    return pending;
  }

  async #introspect(token: string, hash: string, log: FastifyBaseLogger): Promise<MachineCaller> {
    let answer: oidc.IntrospectionResponse;
    try {
      const { configuration } = this.#options.provider;
      if (configuration.serverMetadata().introspection_endpoint === undefined) {
        throw new Error('the provider publishes no introspection_endpoint');
      }
      answer = await oidc.tokenIntrospection(configuration, token, { token_type_hint: 'access_token' });
    } catch (err) {
      // The AS's word that it does not introspect tokens of this kind (oidc-provider: a JWT it did not issue): none it vouches for.
      if ((err as { error?: unknown }).error === 'unsupported_token_type') {
        this.#remember(hash, null, this.#options.clock.now() + this.#ttlMs);
        throw invalid(log, 'unsupported_token_type');
      }
      log.warn({ failure: describeFailure(err) }, 'token introspection failed');
      // Down, not discovered yet, or refusing the gateway's client: the token may be good, the gateway cannot tell.
      throw gatehouseError('GH_ERR_BEARER_UNAVAILABLE', { cause: err });
    }
    const now = this.#options.clock.now();
    const reason = inactiveReason(answer);
    if (reason !== undefined) {
      this.#remember(hash, null, now + this.#ttlMs);
      throw invalid(log, reason);
    }
    const user = claimText(answer[this.#options.providerUserIdClaim]) ?? claimText(answer.sub) ?? claimText(answer.client_id);
    if (user === undefined) throw invalid(log, 'no caller in the introspection answer');
    const caller: MachineCaller = { user, key: `${claimText(answer.iss) ?? 'introspection'} ${user}`, claims: answer, until: this.#until(now, answer.exp) };
    this.#remember(hash, caller, caller.until);
    return caller;
  }

  #until(now: number, exp: unknown): number {
    const ttlEnd = now + this.#ttlMs;
    return typeof exp === 'number' && Number.isFinite(exp) ? Math.min(ttlEnd, exp * 1000) : ttlEnd;
  }

  #remember(hash: string, caller: MachineCaller | null, until: number): void {
    if (until > this.#options.clock.now()) this.#verdicts.set(hash, { caller, until });
  }
}

/**
 * The key a token's verdict is cached under: its SHA-256, so that neither
 * the cache nor a heap dump holds a usable token.
 */
export function tokenHash(token: string): string {
  return sha256Base64url(token);
}

/**
 * Why an introspection answer does not admit its token; undefined when it
 * does. Besides `active` (RFC 7662 §2.2): a token bound to a key (`cnf`,
 * RFC 9449 §6.2, RFC 8705 §3.2) or of another type (a DPoP token) is no
 * bearer token, and must not be accepted as one.
 */
function inactiveReason(answer: oidc.IntrospectionResponse): string | undefined {
  if (answer.active !== true) return 'inactive';
  if (answer.cnf !== undefined) return 'sender-constrained (cnf)';
  if (answer.token_type !== undefined && answer.token_type.toLowerCase() !== 'bearer') return 'not a bearer token';
  return undefined;
}

/** A claim that can name a caller: a non-empty string or a finite number. */
function claimText(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
}

function invalid(log: FastifyBaseLogger, reason: string, issuer?: string): GatehouseError {
  log.info({ reason, ...(issuer === undefined ? {} : { issuer }) }, 'bearer token refused');
  return gatehouseError('GH_ERR_BEARER_INVALID');
}

function unavailable(log: FastifyBaseLogger, err: GatehouseError, issuer: string): GatehouseError {
  log.warn({ failure: describeFailure(err.cause ?? err), issuer }, 'issuer keys unavailable');
  return err;
}
