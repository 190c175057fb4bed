import { randomBytes } from 'node:crypto';
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

/** The only form in which a session id is stored or cached: SHA-256, base64url. */
export function hashSessionId(sessionId: string): string {
  return sha256Base64url(sessionId);
}
