import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { gatehouseError } from '../errors.js';

/** A SET issued longer ago than this is refused (README "Ending sessions"); its `jti` is remembered this long plus the skew. */
export const SET_MAX_AGE_MS = 10 * 60 * 1000;
/** Clock difference tolerated between the transmitter and the gateway. */
export const SET_CLOCK_SKEW_MS = 60 * 1000;
const MAX_TOKEN_LENGTH = 64 * 1024;
/**
 * Asymmetric JWS algorithms only (RFC 7518 §3): `none` and HMAC, whose key
 * would have to be shared with every receiver, are refused.
 */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

/** The events that end every session of their subject. */
export const SESSION_ENDING_EVENTS: Readonly<Record<string, string>> = {
  'https://schemas.openid.net/secevent/caep/event-type/session-revoked': 'session-revoked',
  'https://schemas.openid.net/secevent/caep/event-type/credential-change': 'credential-change',
  'https://schemas.openid.net/secevent/risc/event-type/account-disabled': 'account-disabled',
};

/** RFC 8935 §2.4's error codes this receiver answers with. */
export type SetErrorCode = 'invalid_request' | 'invalid_key' | 'invalid_issuer' | 'invalid_audience';

/** A SET refused: the RFC 8935 §2.3 body the transmitter gets with a 400. */
export class SetRejection extends Error {
  override readonly name = 'SetRejection';
  constructor(
    readonly err: SetErrorCode,
    readonly description: string,
  ) {
    super(description);
  }
}

/** Whom an event names (RFC 9493 subject identifiers): an issuer's subject, or an email address. */
export type EventSubject = { format: 'iss_sub'; iss: string; sub: string } | { format: 'email'; email: string };

/** A SET that passed every check but the single use of its `jti`. */
export interface SecurityEvent {
  iss: string;
  jti: string;
  /** The session-ending events it carries (short names), each with its subject. */
  endings: Array<{ event: string; subject: EventSubject }>;
  /** How many other events it carries (accepted, not acted upon). */
  ignored: number;
}

/**
 * Verifies Security Event Tokens (RFC 8417) pushed by an OpenID Shared
 * Signals transmitter (RFC 8935): the signature with a key of the
 * transmitter's JWKS (fetched, cached, refetched for an unknown `kid` at
 * most every 30 s), `iss` and `aud` exactly, `iat` within the last 10
 * minutes, a `jti`, and an `events` claim. The CAEP `session-revoked` and
 * `credential-change` and RISC `account-disabled` events must name their
 * subject as `iss_sub` or `email` (in `sub_id`, as Shared Signals 1.0 puts
 * it, or in the event's `subject`, as CAEP 1.0 and earlier drafts do).
 * Replay of the `jti` is the caller's check, once the rest has passed, so an
 * invalid SET never uses up a `jti`.
 *
 * @example
 * const verifier = new SecurityEventVerifier({ issuer, audience, jwksUri }, 10_000);
 * const event = await verifier.verify(body); // throws SetRejection, or GH_ERR_PROVIDER_UNAVAILABLE
 */
export class SecurityEventVerifier {
  readonly #issuer: string;
  readonly #audience: string;
  readonly #jwks: ReturnType<typeof createRemoteJWKSet>;

  constructor(options: { issuer: string; audience: string; jwksUri: string }, timeoutMs: number) {
    this.#issuer = options.issuer;
    this.#audience = options.audience;
    this.#jwks = createRemoteJWKSet(new URL(options.jwksUri), { timeoutDuration: timeoutMs, cooldownDuration: 30_000, cacheMaxAge: 10 * 60 * 1000 });
  }

  /**
   * @throws SetRejection (answered 400 with its RFC 8935 body);
   *   GH_ERR_PROVIDER_UNAVAILABLE (503) when the JWKS cannot be fetched, so the transmitter retries.
   */
  async verify(token: string, now = Date.now()): Promise<SecurityEvent> {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) throw new SetRejection('invalid_request', 'the body must be one SET of at most 64 KiB');
    let payload: JWTPayload;
    let typ: string | undefined;
    try {
      ({ payload, protectedHeader: { typ } } = await jwtVerify(token, this.#jwks, {
        issuer: this.#issuer,
        audience: this.#audience,
        algorithms: ALGORITHMS,
        requiredClaims: ['iat'],
        clockTolerance: SET_CLOCK_SKEW_MS / 1000,
        currentDate: new Date(now),
      }));
    } catch (err) {
      throw rejection(err);
    }
    // RFC 8417 §2.3: explicit typing keeps another kind of JWT from passing as a SET.
    if (typ !== undefined && !['secevent+jwt', 'application/secevent+jwt'].includes(typ.toLowerCase())) throw new SetRejection('invalid_request', 'its typ is not secevent+jwt');
    // Issued within the last 10 minutes, exactly: the skew only forgives an iat slightly ahead of this clock.
    const issuedAt = payload.iat! * 1000;
    if (issuedAt < now - SET_MAX_AGE_MS) throw new SetRejection('invalid_request', 'it was issued more than 10 minutes ago (iat)');
    if (issuedAt > now + SET_CLOCK_SKEW_MS) throw new SetRejection('invalid_request', 'its iat is in the future');
    if (typeof payload.jti !== 'string' || payload.jti.length === 0) throw new SetRejection('invalid_request', 'it has no jti');
    // RFC 8417 §2.2: a SET has no nonce (an ID token must not pass for one).
    if (payload.nonce !== undefined) throw new SetRejection('invalid_request', 'it carries a nonce');
    const events = payload.events;
    if (!isObject(events) || Object.keys(events).length === 0) throw new SetRejection('invalid_request', 'it has no events claim');
    const endings: SecurityEvent['endings'] = [];
    let ignored = 0;
    for (const [uri, body] of Object.entries(events)) {
      const event = SESSION_ENDING_EVENTS[uri];
      if (event === undefined) {
        ignored += 1;
        continue;
      }
      const subject = subjectOf(payload.sub_id ?? (isObject(body) ? body.subject : undefined));
      if (subject === undefined) throw new SetRejection('invalid_request', `the ${event} event names no subject of format iss_sub or email`);
      endings.push({ event, subject });
    }
    return { iss: payload.iss!, jti: payload.jti, endings, ignored };
  }
}

/** An RFC 9493 subject identifier of a format this receiver can act on; `complex` through its `user` member. */
function subjectOf(value: unknown, depth = 0): EventSubject | undefined {
  if (!isObject(value)) return undefined;
  if (value.format === 'iss_sub' && isText(value.iss) && isText(value.sub)) return { format: 'iss_sub', iss: value.iss, sub: value.sub };
  if (value.format === 'email' && isText(value.email)) return { format: 'email', email: value.email };
  if (value.format === 'complex' && depth === 0) return subjectOf(value.user, 1);
  return undefined;
}

/** jose's failure as RFC 8935 names it; a JWKS that cannot be fetched is the receiver's trouble, not the SET's. */
function rejection(err: unknown): Error {
  const generic = err instanceof errors.JOSEError && err.code === 'ERR_JOSE_GENERIC';
  if (generic || err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid || (err instanceof TypeError && !(err instanceof errors.JOSEError))) {
    return gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
  }
  if (err instanceof errors.JWTExpired) return new SetRejection('invalid_request', 'it was issued too long ago (iat) or has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return new SetRejection('invalid_issuer', 'its iss is not the configured issuer');
    if (err.claim === 'aud') return new SetRejection('invalid_audience', 'its aud does not name this receiver');
    return new SetRejection('invalid_request', `its ${err.claim} claim is not acceptable`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new SetRejection('invalid_key', 'its signing algorithm is not accepted (asymmetric algorithms only)');
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
    return new SetRejection('invalid_key', 'its signature does not verify with a key of the transmitter');
  }
  return new SetRejection('invalid_request', 'it is not a signed JWT');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isText(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= 512;
}
