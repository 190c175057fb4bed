import { sha256Base64url } from '../hash.js';

/**
 * Store names of the links (SessionStore.saveLink) by which an operator or an
 * identity provider's security event finds a user's record without knowing
 * its key (README "Ending sessions"). Hashes, so the store holds neither a
 * user's name nor their email address in clear.
 */

/** The `userIdClaim` value as shown (with its issuer, '' for a plain OAuth 2.0 server) -> the record key. */
export function userLinkName(issuer: string, user: string): string {
  return `user:${sha256Base64url(JSON.stringify([issuer, user]))}`;
}

/**
 * An email address (case-insensitive, as the `email` subject identifier
 * format of RFC 9493 compares it in practice) -> the record key of the user
 * who last signed in with it.
 */
export function emailLinkName(email: string): string {
  return `email:${sha256Base64url(email.toLowerCase())}`;
}

/** A session handle (src/session/handle.ts) -> the record key of its user. */
export function handleLinkName(handle: string): string {
  return `handle:${handle}`;
}
