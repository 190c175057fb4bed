import { createHmac, hkdfSync } from 'node:crypto';

/** Characters of a handle: 128 bits of HMAC, base64url. */
const HANDLE_LENGTH = 22;
const HANDLE_PATTERN = /^[A-Za-z0-9_-]{22}$/;

/**
 * Pseudonyms of sessions (README "Ending sessions"): what the session API
 * lists and ends, and the `sid` of an identity assertion. A handle is an
 * HMAC of the session's hash under a key derived from the first
 * `session.encryptionKeys` entry, so every replica computes the same handle,
 * and neither a handle nor a copy of the store alone leads to the session id
 * or to its hash (which is the key the store looks sessions up by).
 *
 * @example
 * const handles = new SessionHandles(config.session.encryptionKeys);
 * handles.of(hashSessionId(sessionId)); // 'q3X…' (22 characters)
 */
export class SessionHandles {
  readonly #key: Buffer;

  /** @param base64Keys `session.encryptionKeys`; the first one keys the HMAC. */
  constructor(base64Keys: readonly string[]) {
    // HKDF (RFC 5869) with its own info: the sealing key is never used as an HMAC key directly.
    this.#key = Buffer.from(hkdfSync('sha256', Buffer.from(base64Keys[0]!, 'base64'), Buffer.alloc(0), 'gatehouse session handle', 32));
  }

  /** The handle of the session whose id hashes to `hash`. */
  of(hash: string): string {
    return createHmac('sha256', this.#key).update(hash).digest('base64url').slice(0, HANDLE_LENGTH);
  }

  /** Whether `value` has the shape of a handle (anything else is refused before the store is asked). */
  static isShaped(value: string): boolean {
    return HANDLE_PATTERN.test(value);
  }
}
