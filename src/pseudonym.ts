import { createHmac, hkdfSync } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/**
 * HKDF's `info`: what the key derived from the first encryption key is for,
 * so that it is never the key that seals tokens (RFC 5869 §3.2).
 */
const PURPOSE = 'gatehouse log pseudonym v1';
const KEY_BYTES = 32;
/** Characters of the base64url HMAC kept: 96 bits, enough to tell users apart in logs. */
const LENGTH = 16;

/** A user id -> its log pseudonym, as logs and traces show the user (README "Logs"). */
export type Pseudonymizer = (userId: string) => string;

/**
 * The key of the pseudonyms, derived with HKDF-SHA256 from the first
 * `session.encryptionKeys` entry: every replica and every restart with the
 * same keys computes the same pseudonyms, and no one without the key can
 * compute (or reverse, by hashing candidate addresses) any of them.
 */
export function pseudonymKey(encryptionKey: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(encryptionKey, 'base64'), Buffer.alloc(0), PURPOSE, KEY_BYTES));
}

/**
 * The pseudonym of one user id: the first 16 characters of the base64url
 * HMAC-SHA256 of the id under `pseudonymKey`. `gatehouse pseudonym <user id>`
 * prints it, so an operator can find a user's lines.
 * @example pseudonym(pseudonymKey(config.session.encryptionKeys[0]), 'alice') // 'q1Zb…' (16 characters)
 */
export function pseudonym(key: Buffer, userId: string): string {
  return createHmac('sha256', key).update(userId).digest('base64url').slice(0, LENGTH);
}

/**
 * The pseudonymizer of a gateway, remembering recent users: an access-log
 * line per request would otherwise compute the same HMAC each time.
 */
export function createPseudonymizer(encryptionKey: string): Pseudonymizer {
  const key = pseudonymKey(encryptionKey);
  const recent = new LRUCache<string, string>({ max: 1000 });
  return (userId) => {
    let value = recent.get(userId);
    if (value === undefined) {
      value = pseudonym(key, userId);
      recent.set(userId, value);
    }
    return value;
  };
}
