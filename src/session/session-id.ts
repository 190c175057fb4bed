import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { sha256Base64url } from '../hash.js';

const SESSION_ID_BYTES = 32;
const SESSION_ID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** A new session id: 256 random bits, base64url. */
export function newSessionId(): string {
  return randomBytes(SESSION_ID_BYTES).toString('base64url');
}

/** Whether a cookie value has the shape of a session id (anything else is unknown without a store lookup). */
export function isSessionIdShaped(value: string): boolean {
  return SESSION_ID_PATTERN.test(value);
}

/**
 * The hashes of recently seen ids, so that a request whose session is cached
 * costs a map lookup instead of a SHA-256 (BENCHMARKS.md, hot path). Ids sit
 * here in clear, in this process only, beside the cache that holds their
 * tokens in clear anyway; never in the store, a log or a response.
 */
const recentHashes = new LRUCache<string, string>({ max: 10_000 });

/** The only form in which a session id is stored or cached: SHA-256, base64url. */
export function hashSessionId(sessionId: string): string {
  let hash = recentHashes.get(sessionId);
  if (hash === undefined) {
    hash = sha256Base64url(sessionId);
    recentHashes.set(sessionId, hash);
  }
  return hash;
}
