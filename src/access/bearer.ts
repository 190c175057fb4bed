import type { FastifyBaseLogger } from 'fastify';
import { gatehouseError, isGatehouseError, type GatehouseError } from '../errors.js';
import type { Metrics } from '../metrics/metrics.js';
import { isAllowed } from '../routing/allow.js';
import { identityHeaders } from '../routing/identity-headers.js';
import type { Route } from '../routing/route-table.js';
import { tokenHash, type BearerVerifier, type MachineCaller } from '../machine/bearer-verifier.js';
import type { Verdict } from './admission.js';

/**
 * What the gate decided for a machine client on a route that accepts
 * bearer tokens (README "Machine clients"): a user of the route, like a
 * session's Admission, but with the caller's own token and no session,
 * cookie or refresh.
 */
export interface CallerAdmission {
  verdict: Verdict;
  /** Who the caller is, and the claims `allow` and the identity headers read. */
  caller: MachineCaller;
  /** Whose requests count together toward `limits.perUserConcurrency`. */
  userKey: string;
  /** The caller as shown (the issuer's `userIdClaim` value; logs as a pseudonym, the 403 body). */
  user: string;
  /** The route's identity headers for the caller; undefined when the route names none or the caller may not pass. */
  identity: Record<string, string> | undefined;
  /** The caller's own token, as it sent it: what the upstream receives unless the route says `token: none`. */
  callerToken: string;
}

/** `WWW-Authenticate` of a refused bearer token (RFC 6750 §3.1). */
export const INVALID_TOKEN_CHALLENGE = 'Bearer error="invalid_token"';
/** `WWW-Authenticate` of a bearer-only route asked without a token (RFC 6750 §3.1: no error code then). */
export const BEARER_CHALLENGE = 'Bearer';

/** RFC 6750 §2.1: `Bearer` (any case, RFC 9110 §11.1), one space, a b64token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const SCHEME_LENGTH = 7;

/**
 * The token of an `Authorization: Bearer` header; '' for a Bearer header
 * whose token is malformed (refused like any bad token); undefined for
 * another scheme or no header (the request is then not a machine client's).
 * @example bearerToken('Bearer eyJ...') // 'eyJ...'
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length < SCHEME_LENGTH || header.charCodeAt(6) !== 32 || header.slice(0, 6).toLowerCase() !== 'bearer') return undefined;
  const token = header.slice(SCHEME_LENGTH);
  return B64TOKEN.test(token) ? token : '';
}

/** `allow` and the identity headers of `route` on the caller's claims. */
export function admitCaller(route: Route, caller: MachineCaller, callerToken: string): CallerAdmission {
  const allowed = route.allow === undefined || isAllowed(route.allow, caller.claims);
  return {
    verdict: allowed ? 'pass' : 'forbidden',
    caller,
    userKey: caller.key,
    user: caller.user,
    identity: allowed && route.headers.length > 0 ? identityHeaders(route, caller.claims) : undefined,
    callerToken,
  };
}

/**
 * The machine-client half of the gate, for the proxy, WebSocket upgrades
 * and forward-auth alike: the token verified (src/machine/bearer-verifier.ts),
 * the route's `allow` applied, and each outcome counted once in
 * `gatehouse_bearer_requests_total`.
 */
export class BearerGate {
  constructor(
    readonly verifier: BearerVerifier,
    readonly metrics: Pick<Metrics, 'bearerResults'>,
  ) {}

  /** The admission of a token whose verdict is cached, without a promise (the hot path); undefined when it must be verified. */
  cached(route: Route, token: string, hash: string, now: number): CallerAdmission | undefined {
    const caller = this.verifier.peek(hash, now);
    return caller === undefined ? undefined : this.#count(admitCaller(route, caller, token));
  }

  /**
   * The admission of `token` (`''` for a malformed one). Throws
   * GH_ERR_BEARER_INVALID (401) or GH_ERR_BEARER_UNAVAILABLE (503), counted.
   */
  async admit(route: Route, token: string, log: FastifyBaseLogger, hash = token === '' ? '' : tokenHash(token)): Promise<CallerAdmission> {
    if (token === '') {
      this.metrics.bearerResults.invalid.inc();
      log.info({ reason: 'malformed' }, 'bearer token refused');
      throw gatehouseError('GH_ERR_BEARER_INVALID');
    }
    let caller: MachineCaller;
    try {
      caller = await this.verifier.verify(token, hash, log);
    } catch (err) {
      this.metrics.bearerResults[isGatehouseError(err) && err.code === 'GH_ERR_BEARER_UNAVAILABLE' ? 'unavailable' : 'invalid'].inc();
      throw err;
    }
    return this.#count(admitCaller(route, caller, token));
  }

  #count(admission: CallerAdmission): CallerAdmission {
    this.metrics.bearerResults[admission.verdict === 'pass' ? 'accepted' : 'refused'].inc();
    return admission;
  }
}

/** The refusal of a caller `allow` does not let pass: 403, the caller named. */
export function callerForbidden(admission: CallerAdmission): GatehouseError {
  return gatehouseError('GH_ERR_BEARER_NOT_ALLOWED', { detail: admission.user });
}

/** The `WWW-Authenticate` a bearer refusal carries (RFC 6750 §3), or undefined for one that carries none (403, 503). */
export function bearerChallenge(error: GatehouseError): string | undefined {
  if (error.code === 'GH_ERR_BEARER_INVALID') return INVALID_TOKEN_CHALLENGE;
  if (error.code === 'GH_ERR_BEARER_REQUIRED') return BEARER_CHALLENGE;
  return undefined;
}
