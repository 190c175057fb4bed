import type Keyv from 'keyv';

/** A keyv instance plus what only some backends can do. */
export interface Backend {
  keyv: Keyv;
  /** Whether several replicas may share this backend. */
  shared: boolean;
  /** Store-wide count of live keys starting with `prefix`, where the backend can count. */
  count?: (prefix: string) => Promise<number>;
  /** Deletes expired entries that were never read again. */
  sweep?: () => Promise<void>;
  /** Atomically records `key` for `ttlMs`; true the first time only, whichever replica asks. */
  claimOnce?: (key: string, ttlMs: number) => Promise<boolean>;
  /** Takes the lock `name` shared by every replica, waiting for it; resolves to its release. */
  lock?: (name: string) => Promise<() => Promise<void>>;
  /** Tells the in-process cache what other replicas changed. */
  invalidation?: CacheInvalidation;
  /** Releases what `keyv.disconnect()` does not (other connections, timers). */
  close?: () => Promise<void>;
}

/**
 * What the store needs to keep its in-process cache coherent with other
 * replicas sharing the backend (README "Storage": a change made by one replica is seen
 * by every replica within 200 ms).
 */
export interface CacheInvalidation {
  /** False while invalidations may be missed: the cache must then serve nothing. */
  readonly live: boolean;
  /** Registers the cache owner: called with a store key to forget, or with no key to forget everything. */
  listen(receiver: (key?: string) => void): void;
}
