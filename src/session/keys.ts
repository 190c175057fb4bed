/**
 * Every name gatehouse gives a store key, in one place. A key is
 * `NAMESPACE:<prefix><rest>`; the backends add the namespace, the store the prefix.
 */

/** Prefix of every key gatehouse writes, so a store can be shared with other data. */
export const NAMESPACE = 'gatehouse';

/** What a store key starts with, after the namespace, by what it holds. */
export const KEY_PREFIX = {
  /** A session, by the hash of its id. */
  session: 's:',
  /** A user's sealed token record, by user id. */
  tokens: 't:',
  /** A single-use value already claimed (an OAuth `state`, a logout token's `jti`). */
  once: 'u:',
  /** A back-channel logout link (`sid` or `sub` hash -> user id). */
  link: 'l:',
  /** A lock shared by every replica. */
  lock: 'lock:',
  /** A sign-in rate-limit counter, by route and client address. */
  rate: 'r:',
  /** When a session was last used (ms), by the hash of its id; written at most once a minute (README "Ending sessions"). */
  seen: 'v:',
} as const;

/** The lock under which one user's token record is read, changed and written. */
export function userLock(userId: string): string {
  return `user:${userId}`;
}
