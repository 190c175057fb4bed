import { createPrivateKey, createPublicKey } from 'node:crypto';
import { calculateJwkThumbprint, importPKCS8, SignJWT, type CryptoKey, type JWK } from 'jose';
import type { LRUCache } from 'lru-cache';
import { inspectSigningKey } from '../config/checks/identity.js';

/** Claims the gateway sets itself: a route's `claims` list never overrides them. */
const RESERVED_CLAIMS = new Set(['iss', 'aud', 'sub', 'iat', 'exp', 'nbf', 'jti', 'sid']);

/** How a route sends its assertion, compiled once (src/routing/route-table.ts). */
export interface RouteAssertion {
  /** The header name, lower case. */
  header: string;
  /** The JWT's `aud`. */
  audience: string;
  /** Claims of the user copied in when present. */
  claims: readonly string[];
  /** Signed assertions of this route by session (or machine caller): `cacheKey` -> the JWT and when to sign anew. */
  cache: LRUCache<string, CachedAssertion>;
}

export interface CachedAssertion {
  jwt: string;
  /** ms since the epoch after which a new one is signed. */
  renewAt: number;
  /** The claims it was made from: a refresh that brought new claims gets a new assertion. */
  claims: Readonly<Record<string, unknown>>;
}

/** Who an assertion is about. */
export interface AssertionSubject {
  /** The `userIdClaim` value: the JWT's `sub`. */
  user: string;
  /** The user's claims (ID token / userinfo, or a machine caller's token). */
  claims: Readonly<Record<string, unknown>>;
  /** A pseudonym of the session (src/session/handle.ts); absent for a machine caller. */
  sid?: string;
}

interface SigningKey {
  key: CryptoKey;
  alg: 'ES256' | 'EdDSA';
  kid: string;
}

/**
 * Identity assertions for upstreams (README "Identity assertion"): a JWT
 * signed with the first `assertion.signingKeys` entry, `typ: JWT`, `kid` the
 * key's RFC 7638 thumbprint; claims `iss` (publicUrl), `aud`, `sub`, `iat`,
 * `exp` (`assertion.lifetime` later), the route's listed claims and `sid`.
 * Each route keeps an LRU of what it signed, by session (or machine
 * caller): an assertion is reused until a fifth of its lifetime is left
 * (at most a minute before `exp`), so the hot path signs once per session,
 * route and lifetime, not per request.
 *
 * @example
 * const assertions = await IdentityAssertions.create(config.assertion.signingKeys, 300, publicUrl);
 * const jwt = assertions.cached(route.assertion, hash, subject, now) ?? (await assertions.sign(route.assertion, hash, subject, now));
 */
export class IdentityAssertions {
  /** The JWK Set served at `paths.jwks`: the public half of every key, never a private part. */
  readonly jwks: { keys: JWK[] };
  readonly #signer: SigningKey;
  readonly #issuer: string;
  readonly #lifetimeS: number;
  readonly #renewBeforeMs: number;

  private constructor(signer: SigningKey, jwks: JWK[], issuer: string, lifetimeS: number) {
    this.#signer = signer;
    this.jwks = Object.freeze({ keys: jwks });
    this.#issuer = issuer;
    this.#lifetimeS = lifetimeS;
    this.#renewBeforeMs = Math.min(60_000, (lifetimeS * 1000) / 5);
  }

  /** Imports the keys (checked already by `check`): the first signs, all are published. */
  static async create(pems: readonly string[], lifetimeS: number, issuer: string): Promise<IdentityAssertions> {
    const published: JWK[] = [];
    let signer: SigningKey | undefined;
    for (const pem of pems) {
      const inspected = inspectSigningKey(pem);
      if ('problem' in inspected) throw new Error(`assertion.signingKeys: ${inspected.problem}`);
      const { alg } = inspected;
      // Only the public half is exported: x and y (or x), never d.
      const { kty, crv, x, y } = createPublicKey(createPrivateKey(pem)).export({ format: 'jwk' });
      const publicJwk: JWK = { kty, crv, x, ...(y === undefined ? {} : { y }) };
      const kid = await calculateJwkThumbprint(publicJwk);
      published.push({ ...publicJwk, kid, alg, use: 'sig' });
      signer ??= { key: await importPKCS8(pem, alg), alg, kid };
    }
    if (signer === undefined) throw new Error('assertion.signingKeys: no key');
    return new IdentityAssertions(signer, published, issuer, lifetimeS);
  }

  /** The assertion already signed for `key` on this route, while it is fresh and made from these claims; else undefined. */
  cached(route: RouteAssertion, key: string, subject: AssertionSubject, now: number): string | undefined {
    const entry = route.cache.get(key);
    return entry !== undefined && entry.renewAt > now && entry.claims === subject.claims ? entry.jwt : undefined;
  }

  /** Signs a new assertion for `subject` on this route and keeps it for `key`. */
  async sign(route: RouteAssertion, key: string, subject: AssertionSubject, now: number): Promise<string> {
    const iat = Math.floor(now / 1000);
    const payload: Record<string, unknown> = {};
    for (const name of route.claims) {
      const value = subject.claims[name];
      if (value !== undefined && !RESERVED_CLAIMS.has(name)) payload[name] = value;
    }
    if (subject.sid !== undefined) payload.sid = subject.sid;
    const jwt = await new SignJWT(payload)
      .setProtectedHeader({ alg: this.#signer.alg, kid: this.#signer.kid, typ: 'JWT' })
      .setIssuer(this.#issuer)
      .setAudience(route.audience)
      .setSubject(subject.user)
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.#lifetimeS)
      .sign(this.#signer.key);
    route.cache.set(key, { jwt, renewAt: iat * 1000 + this.#lifetimeS * 1000 - this.#renewBeforeMs, claims: subject.claims });
    return jwt;
  }
}
