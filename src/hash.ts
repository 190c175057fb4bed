import { hash } from 'node:crypto';

/**
 * SHA-256 of `value`, base64url: the form in which gatehouse keeps an
 * identifier it must recognise but not hold in clear (session ids, `state`,
 * logout-token ids, back-channel logout links, log pseudonyms).
 */
export function sha256Base64url(value: string): string {
  return hash('sha256', value, 'base64url');
}
