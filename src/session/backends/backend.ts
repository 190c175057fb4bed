import { AsyncLocalStorage } from 'node:async_hooks';
import type Keyv from 'keyv';
import { KEY_PREFIX } from '../keys.js';

/**
 * Thrown by `Backend.lock` when the lock stays held by someone else for the
 * whole wait: the store answered, so this fails one request, never the
 * store (test/redis/lock-lease.test.ts).
 */
export class LockBusyError extends Error {
  override name = 'LockBusyError';
}

/**
 * Proof that a shared lock is held: the lock's key and the holder's token. A
 * write made under the lock is fenced by it: the backend writes only if the
 * lock still holds the token, in one atomic step (test/redis/lock-lease.test.ts).
 */
export interface LockFence {
  key: string;
  token: string;
}

/** Releases a lock; carries its fence when the backend fences writes. */
export type LockRelease = (() => Promise<void>) & { fence?: LockFence };

/** The fence of the shared lock the current task runs under (set by SessionStore.withLock). */
export const lockFence = new AsyncLocalStorage<LockFence | undefined>();

/**
 * A fenced write found its lock lapsed and taken by someone else: nothing was
 * written. Like a busy lock, it fails the request, not the store.
 */
export class LockLostError extends LockBusyError {
  override name = 'LockLostError';
}

/** What `Backend.readSession` found; `tokens` is read only when the session names a user. */
export interface SessionRead {
  session: unknown;
  tokens: unknown;
}

/** `Backend.readSession` as two reads, for backends that cannot join them. */
export function readSessionTwice(keyv: Keyv): Backend['readSession'] {
  return async (sessionKey) => {
    const session: unknown = await keyv.get(sessionKey);
    const userId = (session as { userId?: unknown } | undefined)?.userId;
    return { session, tokens: typeof userId === 'string' ? await keyv.get(`${KEY_PREFIX.tokens}${userId}`) : undefined };
  };
}

/** A keyv instance plus what only some backends can do. */
export interface Backend {
  keyv: Keyv;
  /**
   * A session (store key `s:<hash>`) and the token record of its user
   * (`t:<userId>`), as `keyv.get` would give each; the SQLite backend reads
   * both in one statement (a cold request otherwise pays two).
   */
  readSession: (sessionKey: string) => Promise<SessionRead>;
  /**
   * Writes several entries (`ttlMs` each) at once, as `keyv.set` would write
   * each; without it the store writes them one by one. The SQLite backend
   * writes them in one statement: the last uses of a minute's sessions
   * (README "Ending sessions") would otherwise cost a statement each.
   */
  setMany?: (entries: ReadonlyArray<{ key: string; value: number; ttlMs: number }>) => Promise<void>;
  /** Whether several replicas may share this backend. */
  shared: boolean;
  /** Store-wide count of live keys starting with `prefix`, where the backend can count. */
  count?: (prefix: string) => Promise<number>;
  /** Deletes expired entries that were never read again. */
  sweep?: () => Promise<void>;
  /** Atomically records `key` for `ttlMs`; true the first time only, whichever replica asks. */
  claimOnce?: (key: string, ttlMs: number) => Promise<boolean>;
  /**
   * Counts one hit of `key` in a fixed window of `windowMs` that starts at
   * its first hit, for every replica at once; resolves to the count so far
   * and the ms left in the window.
   */
  countHit?: (key: string, windowMs: number) => Promise<{ count: number; ttlMs: number }>;
  /** Takes the lock `name` shared by every replica, waiting for it; resolves to its release. */
  lock?: (name: string) => Promise<LockRelease>;
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
