import { LRUCache } from 'lru-cache';
import { LockBusyError, lockFence, type Backend, type LockRelease } from './backends/backend.js';
import { KEY_PREFIX } from './keys.js';
import { Sealer } from './seal.js';
import { gatehouseError, type GatehouseError } from '../errors.js';
import { systemClock, type Clock } from '../clock.js';

/**
 * A user's DPoP key pair as kept in the token record: the private JWK of an
 * ES256 (P-256) key. It lives only inside the sealed record (AES-256-GCM,
 * bound to the user), so every replica signs with the same key and a copy
 * of the store yields no usable key (README "Client authentication and
 * sender-constrained tokens").
 */
export interface DpopKey {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

/** A browser session: the hash of its id points at a user. */
export interface SessionRecord {
  userId: string;
  /** The provider the session was made with (README "Several identity providers"); absent: `default`. */
  provider?: string;
  /** Absolute end of the session, ms since the epoch. */
  expiresAt: number;
  /** The ID token's `sid` (the authorization server's session), for back-channel logout. */
  sid?: string;
  /** Last recorded use, ms since the epoch, for `session.idleTimeout` (written at most every tenth of it). */
  seenAt?: number;
  /** When the sign-in created it, ms since the epoch (absent in sessions from before it was kept). */
  createdAt?: number;
  /**
   * The validated ID token's `acr` and `auth_time` (seconds) of the sign-in
   * that created this session: what a route's step-up reads (README
   * "Step-up"). Per session, not in the user's shared token record: a
   * stronger sign-in in one browser does not strengthen the user's others.
   */
  acr?: string;
  authTime?: number;
  /**
   * With `sites`: the sign-in host's session (its hash) a site's session was
   * handed off from (README "Several sites"). Sessions of one group end together.
   */
  group?: string;
}

/** Everything the gateway holds for one user; shared by all of the user's sessions. */
export interface TokenRecord {
  /** The record's key (iss + sub with an OpenID provider, see src/oauth/identify.ts). */
  userId: string;
  /** The provider the tokens come from, where they are refreshed and revoked; absent: `default`. */
  provider?: string;
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
  /**
   * With `provider.dpop`: the key the access token is bound to (RFC 9449).
   * Sealed with the rest of the record, never written in clear.
   */
  dpopKey?: DpopKey;
  /**
   * Token target id -> the user's token for that target (README "A token for
   * each API"), each with its own expiry; sealed with the rest of the record.
   */
  targets?: Record<string, TargetToken>;
}

/** A user's token for one token target (src/config/token-targets.ts). */
export interface TargetToken {
  accessToken: string;
  /** When it expires, ms since the epoch. */
  expiresAt: number;
  /** Lifetime the AS granted it, seconds. */
  lifetime: number;
  /** Whether it is bound to the record's DPoP key (RFC 9449): only then does the upstream get a proof with it. */
  bound?: true;
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
/**
 * The grain of a session's last use as the session API shows it (README
 * "Ending sessions"): each replica writes it at most once per session in
 * this window, in the background, never on every request.
 */
export const SEEN_GRAIN_MS = 60 * 1000;
/**
 * How long noted uses wait to be written together: a cold start (or more
 * sessions than requests in a minute) notes nearly every request, and one
 * statement per use cost the SQLite backend more than the session read.
 */
const SEEN_FLUSH_MS = 500;

type Cached = { kind: 'session'; record: SessionRecord } | { kind: 'tokens'; record: TokenRecord };

/**
 * A token record as the cache keeps it: without the ID token, which no
 * proxied request reads (about a kilobyte of every cached entry). What needs
 * it (logout's id_token_hint, a token target exchanging it, a refresh keeping
 * it) reads the record from the backend (`getTokens(userId, true)`), as every
 * read-modify-write of the record does already.
 */
function cachedTokens(record: TokenRecord): TokenRecord {
  if (record.idToken === undefined) return record;
  const { idToken: _idToken, ...cached } = record;
  return cached;
}

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
  /** Bumped when `#versions` forgets a key or another replica invalidates everything: a read that overlapped it is not cached. */
  #generation = 0;
  /**
   * Store key -> a counter bumped when a write or delete of that key starts
   * and when it ends, and by another replica's invalidation of it. A read
   * fills the cache only if the counter (and `#generation`) did not move
   * while it ran: a read in flight during a logout must not cache the
   * deleted session again (with SQLite a delete is a SELECT then a DELETE),
   * nor a stale token record (test/store/read-write-race.test.ts).
   */
  readonly #versions: LRUCache<string, number>;
  /** Bumped with every version: how a read learns that some write overlapped it. */
  #touches = 0;
  /** Hashes of the sessions whose use this replica recorded in the current SEEN_GRAIN_MS window. */
  #seen = new Set<string>();
  /** Uses noted and not yet written: store key -> when (ms) and for how long to keep it. */
  #unwrittenSeen = new Map<string, { value: number; ttlMs: number }>();
  #seenFlush: NodeJS.Timeout | undefined;

  /** The gateway's clock: session and record expiry are judged by it (the backend's own TTLs and the readiness probe keep real time). */
  readonly clock: Clock;

  constructor(backend: Backend, sealer: Sealer, cacheSize: number, clock: Clock = systemClock) {
    this.clock = clock;
    this.#backend = backend;
    this.#sealer = sealer;
    this.#cache = new LRUCache({ max: cacheSize });
    this.#versions = new LRUCache({
      max: Math.max(cacheSize, 1000),
      dispose: (_version, _key, reason) => {
        if (reason === 'evict') this.#generation += 1;
      },
    });
    this.#timers.push(setInterval(() => void this.ping(), PING_INTERVAL_MS).unref());
    this.#timers.push(setInterval(() => this.#seen.clear(), SEEN_GRAIN_MS).unref());
    if (backend.sweep) this.#timers.push(setInterval(() => void this.#call(backend.sweep!).catch(() => {}), SWEEP_INTERVAL_MS).unref());
    backend.invalidation?.listen((key) => {
      if (key === undefined) {
        this.#generation += 1;
        this.#cache.clear();
      } else {
        this.#touch(key);
        this.#cache.delete(key);
      }
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
   * The session for a hashed id from the cache alone, without a promise: null
   * when cached but expired, undefined when only the backend can tell (the
   * hot path, src/session/resolve.ts). Throws GH_ERR_STORE_UNAVAILABLE while
   * the backend is down.
   */
  peekSession(hash: string, now = this.clock.now()): SessionRecord | null | undefined {
    this.#assertAvailable();
    const cached = this.#cached(`${KEY_PREFIX.session}${hash}`);
    if (cached?.kind !== 'session') return undefined;
    return cached.record.expiresAt > now ? cached.record : null;
  }

  /** The user's token record from the cache alone, without its ID token (see cachedTokens); undefined when only the backend can tell. */
  peekTokens(userId: string): TokenRecord | undefined {
    this.#assertAvailable();
    const cached = this.#cached(`${KEY_PREFIX.tokens}${userId}`);
    return cached?.kind === 'tokens' ? cached.record : undefined;
  }

  /** The session for a hashed id, or null when unknown or expired. A cache hit costs no I/O. */
  async getSession(hash: string, now = this.clock.now()): Promise<SessionRecord | null> {
    const peeked = this.peekSession(hash, now);
    if (peeked !== undefined) return peeked;
    const key = `${KEY_PREFIX.session}${hash}`;
    const generation = this.#generation;
    const version = this.#versions.get(key);
    const touches = this.#touches;
    const read = await this.#call(() => this.#backend.readSession(key));
    const record = read.session as SessionRecord | undefined;
    if (!record || record.expiresAt <= now) return null;
    if (generation === this.#generation && version === this.#versions.get(key)) this.#cache.set(key, { kind: 'session', record });
    // The token record's key was unknown before the read: it is cached only if no write at all overlapped the read.
    if (generation === this.#generation && touches === this.#touches) this.#cacheTokens(record.userId, read.tokens);
    return record;
  }

  /** Caches a token record read along with a session, unless it is cached already (no second unseal). */
  #cacheTokens(userId: string, sealed: unknown): void {
    const key = `${KEY_PREFIX.tokens}${userId}`;
    if (typeof sealed !== 'string' || this.#cache.has(key)) return;
    const plaintext = this.#sealer.unseal(sealed, `tokens:${userId}`);
    if (plaintext !== undefined) this.#cache.set(key, { kind: 'tokens', record: cachedTokens(JSON.parse(plaintext) as TokenRecord) });
  }

  async saveSession(hash: string, record: SessionRecord, now = this.clock.now()): Promise<void> {
    await this.#write(`${KEY_PREFIX.session}${hash}`, { kind: 'session', record }, () =>
      this.#backend.keyv.set(`${KEY_PREFIX.session}${hash}`, record, record.expiresAt - now),
    );
  }

  async deleteSession(hash: string): Promise<void> {
    await this.#write(`${KEY_PREFIX.session}${hash}`, undefined, () => this.#backend.keyv.delete(`${KEY_PREFIX.session}${hash}`));
  }

  /**
   * Records that the session `hash` was used at `now`: the first use in each
   * SEEN_GRAIN_MS window writes it, in the background (a failed write is
   * dropped: the last use is informative, the idle timeout has its own
   * `seenAt`); every other use costs one Set lookup and no I/O. Kept apart
   * from the session entry so that a late write never brings back a session
   * that a logout just deleted. The uses noted within SEEN_FLUSH_MS are
   * written together.
   */
  noteSeen(hash: string, now: number, expiresAt: number): void {
    if (this.#seen.has(hash)) return;
    this.#seen.add(hash);
    if (!this.#available) return;
    this.#unwrittenSeen.set(`${KEY_PREFIX.seen}${hash}`, { value: now, ttlMs: Math.max(1, expiresAt - now) });
    this.#seenFlush ??= setTimeout(() => void this.#writeSeen(), SEEN_FLUSH_MS).unref();
  }

  /** Writes the uses noted since the last flush, in one call; a failed write is dropped (see noteSeen). */
  async #writeSeen(): Promise<void> {
    this.#seenFlush = undefined;
    if (this.#unwrittenSeen.size === 0) return;
    const entries = [...this.#unwrittenSeen].map(([key, { value, ttlMs }]) => ({ key, value, ttlMs }));
    this.#unwrittenSeen = new Map();
    const setMany = this.#backend.setMany;
    // Elsewhere one write each, as before (keyv's setMany is one MULTI, refused across a Redis cluster's slots).
    const write = setMany ? () => setMany(entries) : () => Promise.all(entries.map(({ key, value, ttlMs }) => this.#backend.keyv.set(key, value, ttlMs)));
    await this.#call<unknown>(write).catch(() => undefined);
  }

  /** When the session `hash` was last recorded as used (ms), or undefined. Never cached: the session API reads it. */
  async lastSeen(hash: string): Promise<number | undefined> {
    this.#assertAvailable();
    const key = `${KEY_PREFIX.seen}${hash}`;
    const unwritten = this.#unwrittenSeen.get(key);
    if (unwritten !== undefined) return unwritten.value;
    const seen = await this.#call(() => this.#backend.keyv.get(key));
    return typeof seen === 'number' ? seen : undefined;
  }

  /**
   * The user's token record; `fromBackend` skips the cache (to re-read under a
   * lock) and is the only way to the ID token: a record from the cache has none.
   */
  async getTokens(userId: string, fromBackend = false): Promise<TokenRecord | null> {
    if (!fromBackend) {
      const peeked = this.peekTokens(userId);
      if (peeked !== undefined) return peeked;
    } else {
      this.#assertAvailable();
    }
    const key = `${KEY_PREFIX.tokens}${userId}`;
    const generation = this.#generation;
    const version = this.#versions.get(key);
    const sealed = (await this.#call(() => this.#backend.keyv.get(key))) as string | undefined;
    const plaintext = sealed === undefined ? undefined : this.#sealer.unseal(sealed, `tokens:${userId}`);
    if (plaintext === undefined) return null;
    const record = JSON.parse(plaintext) as TokenRecord;
    if (generation === this.#generation && version === this.#versions.get(key)) this.#cache.set(key, { kind: 'tokens', record: cachedTokens(record) });
    return record;
  }

  /** Writes a token record (always sealed with the first key); it lives as long as its longest session. */
  async saveTokens(record: TokenRecord, now = this.clock.now()): Promise<void> {
    const lastExpiry = Math.max(now + 1, ...Object.values(record.sessions));
    const sealed = this.#sealer.seal(JSON.stringify(record), `tokens:${record.userId}`);
    const key = `${KEY_PREFIX.tokens}${record.userId}`;
    await this.#write(key, { kind: 'tokens', record: cachedTokens(record) }, () => this.#backend.keyv.set(key, sealed, lastExpiry - now));
  }

  async deleteTokens(userId: string): Promise<void> {
    const key = `${KEY_PREFIX.tokens}${userId}`;
    await this.#write(key, undefined, () => this.#backend.keyv.delete(key));
  }

  /**
   * A write (`entry`) or delete (undefined) of `key`: its version moves when it
   * starts and when it ends, so no read overlapping it fills the cache, and
   * the cache holds the outcome afterwards (nothing, for a delete or a
   * failed write).
   */
  async #write(key: string, entry: Cached | undefined, operation: () => Promise<unknown>): Promise<void> {
    this.#cache.delete(key);
    this.#touch(key);
    try {
      await this.#call(operation);
    } finally {
      this.#touch(key);
      this.#cache.delete(key);
    }
    if (entry !== undefined) this.#cache.set(key, entry);
  }

  #touch(key: string): void {
    this.#touches += 1;
    this.#versions.set(key, (this.#versions.get(key) ?? 0) + 1);
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
    // Token-record writes inside `task` are fenced by the shared lock's token (src/session/backends/redis.ts).
    const guarded = shared
      ? () => this.#takeSharedLock(shared, name).then((release) => lockFence.run(release.fence, task).finally(() => release().catch(() => {})))
      : task;
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
   * Waits for another replica's lock. The wait is not store I/O: the backend
   * bounds it itself, and a lock held too long fails this request only
   * (GH_ERR_STORE_BUSY), never marks the store down for every user of the
   * replica nor flushes the cache. A backend that cannot be asked does
   * (test/redis/lock-lease.test.ts).
   */
  async #takeSharedLock(lock: NonNullable<Backend['lock']>, name: string): Promise<LockRelease> {
    this.#assertAvailable();
    try {
      const release = await lock(name);
      this.#answered();
      return release;
    } catch (cause) {
      if (cause instanceof LockBusyError) throw gatehouseError('GH_ERR_STORE_BUSY', { cause });
      throw this.#failed(cause);
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

  /**
   * Counts a hit of `key` for every replica sharing the store, in a window
   * of `windowMs` from its first hit; undefined when the backend counts only
   * in this process (README "Limits under abuse": the sign-in rate limit).
   */
  get countHit(): ((key: string, windowMs: number) => Promise<{ count: number; ttlMs: number }>) | undefined {
    const count = this.#backend.countHit;
    return count ? (key, windowMs) => this.#call(() => count(`${KEY_PREFIX.rate}${key}`, windowMs)) : undefined;
  }

  /** Deletes expired entries the backend keeps until read (it also runs every 10 minutes by itself). */
  async sweep(): Promise<void> {
    const sweep = this.#backend.sweep;
    if (sweep) await this.#call(sweep);
  }

  /** Store-wide number of live sessions, where the backend can count them. */
  get countSessions(): (() => Promise<number>) | undefined {
    const count = this.#backend.count;
    // A slow count (a scrape of /metrics) says nothing about requests: it never marks the store down.
    return count ? () => withTimeout(count(KEY_PREFIX.session), CALL_TIMEOUT_MS) : undefined;
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
    clearTimeout(this.#seenFlush);
    if (this.#available) await this.#writeSeen();
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
      this.#answered();
      return result;
    } catch (cause) {
      // A fenced write refused because the lock lapsed: the store answered.
      if (cause instanceof LockBusyError) throw gatehouseError('GH_ERR_STORE_BUSY', { cause });
      throw this.#failed(cause);
    }
  }

  #answered(): void {
    this.#available = true;
    this.#lastAnswer = Date.now();
  }

  /** Marks the store down (the cache then serves nothing) and returns the error for the request. */
  #failed(cause: unknown): GatehouseError {
    if (this.#available) this.#cache.clear();
    this.#available = false;
    return gatehouseError('GH_ERR_STORE_UNAVAILABLE', { cause });
  }
}

function withTimeout<T>(pending: Promise<T>, timeoutMs: number): Promise<T> {
  if (timeoutMs === Infinity) return pending;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new StoreTimeoutError(timeoutMs)), timeoutMs);
  });
  return Promise.race([pending, expired]).finally(() => clearTimeout(timer));
}

/**
 * The store did not answer in time. Its `code` is what the "store
 * unavailable" log line names (src/failure.ts reads it), so nothing has to
 * recognise the failure by its message.
 */
export class StoreTimeoutError extends Error {
  override readonly name = 'StoreTimeoutError';
  readonly code = 'TIMEOUT';
  constructor(readonly timeoutMs: number) {
    super(`the store did not answer within ${timeoutMs} ms`);
  }
}
