import { LRUCache } from 'lru-cache';
import type { Backend } from './backends/backend.js';
import { KEY_PREFIX } from './keys.js';
import { Sealer } from './seal.js';
import { gatehouseError } from '../errors.js';

/** A browser session: the hash of its id points at a user. */
export interface SessionRecord {
  userId: string;
  /** Absolute end of the session, ms since the epoch. */
  expiresAt: number;
  /** The ID token's `sid` (the authorization server's session), for back-channel logout. */
  sid?: string;
  /** Last recorded use, ms since the epoch, for `session.idleTimeout` (written at most every tenth of it). */
  seenAt?: number;
}

/** Everything the gateway holds for one user; shared by all of the user's sessions. */
export interface TokenRecord {
  /** The record's key (iss + sub with an OpenID provider, see src/oauth/identify.ts). */
  userId: string;
  /** The `userIdClaim` value shown for the user (logs, pages); absent in records from before it was kept. */
  user?: string;
  accessToken: string;
  refreshToken?: string;
  /** When the access token expires, ms since the epoch. */
  expiresAt: number;
  /** Lifetime the AS granted the access token, seconds. */
  lifetime: number;
  idToken?: string;
  /** Claims of the ID token or the userinfo response: what /session shows. */
  claims: Record<string, unknown>;
  /** Hashes of the user's live sessions -> their expiry (ms), to end them all at once. */
  sessions: Record<string, number>;
}

/** How long the store may stay silent before it counts as unreachable for /readyz. */
export const STORE_FRESHNESS_MS = 5000;
const PING_INTERVAL_MS = 2000;
/**
 * A backend call without an answer after this long fails as the store being
 * unavailable: a hung store (a paused Redis, say) must give 503s, not hang
 * requests. node-redis's command timeout does not cover a command already sent.
 */
const CALL_TIMEOUT_MS = 2000;
const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

type Cached = { kind: 'session'; record: SessionRecord } | { kind: 'tokens'; record: TokenRecord };

/**
 * Sessions and token records behind an in-process LRU. Token records are
 * sealed with AES-256-GCM before they reach the backend; sessions are keyed by
 * the hash of their id only. Every backend failure becomes
 * GH_ERR_STORE_UNAVAILABLE, and while the backend is known to be down the
 * cache serves nothing (README "Storage").
 */
export class SessionStore {
  readonly #backend: Backend;
  readonly #sealer: Sealer;
  readonly #cache: LRUCache<string, Cached>;
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #timers: NodeJS.Timeout[] = [];
  #available = true;
  #lastAnswer = Date.now();
  /** Bumped by every invalidation from another replica: a read that overlapped one is not cached. */
  #generation = 0;

  constructor(backend: Backend, sealer: Sealer, cacheSize: number) {
    this.#backend = backend;
    this.#sealer = sealer;
    this.#cache = new LRUCache({ max: cacheSize });
    this.#timers.push(setInterval(() => void this.ping(), PING_INTERVAL_MS).unref());
    if (backend.sweep) this.#timers.push(setInterval(() => void this.#call(backend.sweep!).catch(() => {}), SWEEP_INTERVAL_MS).unref());
    backend.invalidation?.listen((key) => {
      this.#generation += 1;
      if (key === undefined) this.#cache.clear();
      else this.#cache.delete(key);
    });
  }

  /** Whether the backend answered within the last STORE_FRESHNESS_MS. */
  get ready(): boolean {
    return this.#available && Date.now() - this.#lastAnswer < STORE_FRESHNESS_MS;
  }

  /** Whether replicas may share this store. */
  get shared(): boolean {
    return this.#backend.shared;
  }

  /**
   * The session for a hashed id, or null when unknown or expired. An LRU hit
   * costs no I/O: this is the hot path.
   */
  async getSession(hash: string, now = Date.now()): Promise<SessionRecord | null> {
    this.#assertAvailable();
    const cached = this.#cached(`${KEY_PREFIX.session}${hash}`);
    if (cached?.kind === 'session') return cached.record.expiresAt > now ? cached.record : null;
    const generation = this.#generation;
    const record = (await this.#call(() => this.#backend.keyv.get(`${KEY_PREFIX.session}${hash}`))) as SessionRecord | undefined;
    if (!record || record.expiresAt <= now) return null;
    if (generation === this.#generation) this.#cache.set(`${KEY_PREFIX.session}${hash}`, { kind: 'session', record });
    return record;
  }

  async saveSession(hash: string, record: SessionRecord, now = Date.now()): Promise<void> {
    await this.#call(() => this.#backend.keyv.set(`${KEY_PREFIX.session}${hash}`, record, record.expiresAt - now));
    this.#cache.set(`${KEY_PREFIX.session}${hash}`, { kind: 'session', record });
  }

  async deleteSession(hash: string): Promise<void> {
    this.#cache.delete(`${KEY_PREFIX.session}${hash}`);
    await this.#call(() => this.#backend.keyv.delete(`${KEY_PREFIX.session}${hash}`));
  }

  /** The user's token record; `fromBackend` skips the cache (to re-read under a lock). */
  async getTokens(userId: string, fromBackend = false): Promise<TokenRecord | null> {
    this.#assertAvailable();
    if (!fromBackend) {
      const cached = this.#cached(`${KEY_PREFIX.tokens}${userId}`);
      if (cached?.kind === 'tokens') return cached.record;
    }
    const generation = this.#generation;
    const sealed = (await this.#call(() => this.#backend.keyv.get(`${KEY_PREFIX.tokens}${userId}`))) as string | undefined;
    const plaintext = sealed === undefined ? undefined : this.#sealer.unseal(sealed, `tokens:${userId}`);
    if (plaintext === undefined) return null;
    const record = JSON.parse(plaintext) as TokenRecord;
    if (generation === this.#generation) this.#cache.set(`${KEY_PREFIX.tokens}${userId}`, { kind: 'tokens', record });
    return record;
  }

  /** Writes a token record (always sealed with the first key); it lives as long as its longest session. */
  async saveTokens(record: TokenRecord, now = Date.now()): Promise<void> {
    const lastExpiry = Math.max(now + 1, ...Object.values(record.sessions));
    const sealed = this.#sealer.seal(JSON.stringify(record), `tokens:${record.userId}`);
    await this.#call(() => this.#backend.keyv.set(`${KEY_PREFIX.tokens}${record.userId}`, sealed, lastExpiry - now));
    this.#cache.set(`${KEY_PREFIX.tokens}${record.userId}`, { kind: 'tokens', record });
  }

  async deleteTokens(userId: string): Promise<void> {
    this.#cache.delete(`${KEY_PREFIX.tokens}${userId}`);
    await this.#call(() => this.#backend.keyv.delete(`${KEY_PREFIX.tokens}${userId}`));
  }

  /**
   * Records `key` as used and returns true the first time only, for
   * single-use values such as an OAuth `state` (RFC 9700 §4.7.1).
   */
  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    const claim = this.#backend.claimOnce;
    if (claim) return this.#call(() => claim(`${KEY_PREFIX.once}${key}`, ttlMs));
    return this.withLock(`claim:${key}`, async () => {
      const seen = await this.#call(() => this.#backend.keyv.get(`${KEY_PREFIX.once}${key}`));
      if (seen !== undefined) return false;
      await this.#call(() => this.#backend.keyv.set(`${KEY_PREFIX.once}${key}`, 1, ttlMs));
      return true;
    });
  }

  /**
   * Runs `task` while holding the lock named `name` in this process (and, on
   * a shared backend, across every replica), so read-modify-write of one
   * user's record never interleaves.
   */
  async withLock<T>(name: string, task: () => Promise<T>): Promise<T> {
    const shared = this.#backend.lock;
    // Waiting for another replica's lock is not a hung store: the backend bounds that wait itself.
    const guarded = shared ? () => this.#call(() => shared(name), Infinity).then((release) => task().finally(() => release().catch(() => {}))) : task;
    const previous = this.#locks.get(name) ?? Promise.resolve();
    const current = previous.then(guarded, guarded);
    const settled = current.catch(() => {});
    this.#locks.set(name, settled);
    try {
      return await current;
    } finally {
      if (this.#locks.get(name) === settled) this.#locks.delete(name);
    }
  }

  /**
   * Points `name` at a user id for `ttlMs`: how a back-channel logout token's
   * `sid` or `sub` finds the user. `name` must already be a hash of those.
   */
  async saveLink(name: string, userId: string, ttlMs: number): Promise<void> {
    await this.#call(() => this.#backend.keyv.set(`${KEY_PREFIX.link}${name}`, userId, ttlMs));
  }

  /** The user id `name` points at, or null. Never cached: links are rare reads. */
  async getLink(name: string): Promise<string | null> {
    this.#assertAvailable();
    const userId = (await this.#call(() => this.#backend.keyv.get(`${KEY_PREFIX.link}${name}`))) as string | undefined;
    return typeof userId === 'string' ? userId : null;
  }

  /** Deletes expired entries the backend keeps until read (it also runs every 10 minutes by itself). */
  async sweep(): Promise<void> {
    const sweep = this.#backend.sweep;
    if (sweep) await this.#call(sweep);
  }

  /** Store-wide number of live sessions, where the backend can count them. */
  get countSessions(): (() => Promise<number>) | undefined {
    const count = this.#backend.count;
    return count ? () => this.#call(() => count(KEY_PREFIX.session)) : undefined;
  }

  /** Asks the backend for a key, to learn whether it answers. */
  async ping(): Promise<boolean> {
    try {
      await this.#call(() => this.#backend.keyv.has('ping'));
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    await this.#backend.close?.();
    await this.#backend.keyv.disconnect();
  }

  /** A cache entry, unless another replica's changes may have been missed (then every read goes to the backend). */
  #cached(key: string): Cached | undefined {
    return this.#backend.invalidation?.live === false ? undefined : this.#cache.get(key);
  }

  #assertAvailable(): void {
    if (!this.#available) throw gatehouseError('GH_ERR_STORE_UNAVAILABLE');
  }

  async #call<T>(operation: () => Promise<T>, timeoutMs = CALL_TIMEOUT_MS): Promise<T> {
    try {
      const result = await withTimeout(operation(), timeoutMs);
      this.#available = true;
      this.#lastAnswer = Date.now();
      return result;
    } catch (cause) {
      if (this.#available) this.#cache.clear();
      this.#available = false;
      throw gatehouseError('GH_ERR_STORE_UNAVAILABLE', { cause });
    }
  }
}

function withTimeout<T>(pending: Promise<T>, timeoutMs: number): Promise<T> {
  if (timeoutMs === Infinity) return pending;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`the store did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([pending, expired]).finally(() => clearTimeout(timer));
}
