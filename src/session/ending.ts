import { sha256Base64url } from '../hash.js';
import { userLock } from './keys.js';
import type { SessionStore, TokenRecord } from './store.js';

/** What {@link endSessions} did. */
export interface EndedSessions {
  /** The user's token record as it was before (for revocation and the logout hint). */
  record: TokenRecord;
  /** How many sessions were ended (expired ones swept along are counted too). */
  ended: number;
  /** Whether no session of the user remains: the token record was deleted. */
  lastOut: boolean;
}

/**
 * Ends the sessions of `userId` that `selected` picks (and any already
 * expired), under the user's lock: their session entries are deleted and
 * they leave the user's token record; the record itself is deleted once no
 * session remains, so no orphaned tokens stay behind. Null when the user has
 * no token record.
 *
 * @example
 * const result = await endSessions(store, userId, () => true); // every session of the user
 */
export async function endSessions(
  store: SessionStore,
  userId: string,
  selected: (hash: string) => boolean | Promise<boolean>,
): Promise<EndedSessions | null> {
  return store.withLock(userLock(userId), async () => {
    const record = await store.getTokens(userId, true);
    return record ? endSessionsOf(store, record, selected) : null;
  });
}

/**
 * {@link endSessions} for a caller that holds the user's lock and the record
 * already (a refresh the AS rejected ends every session of the user this way).
 */
export async function endSessionsOf(store: SessionStore, record: TokenRecord, selected: (hash: string) => boolean | Promise<boolean>): Promise<EndedSessions> {
  const now = store.clock.now();
  const ended: string[] = [];
  const kept: Record<string, number> = {};
  for (const [hash, expiresAt] of Object.entries(record.sessions)) {
    if (expiresAt <= now || (await selected(hash))) ended.push(hash);
    else kept[hash] = expiresAt;
  }
  await Promise.all(ended.map((hash) => store.deleteSession(hash)));
  const lastOut = Object.keys(kept).length === 0;
  if (lastOut) await store.deleteTokens(record.userId);
  else if (ended.length > 0) await store.saveTokens({ ...record, sessions: kept }, now);
  return { record, ended: ended.length, lastOut };
}

/**
 * The store name of a back-channel logout link (`sid` or `sub` -> user id):
 * a hash, so the store holds no authorization-server identifier in clear.
 */
export function logoutLinkName(kind: 'sid' | 'sub', value: string): string {
  return `${kind}:${sha256Base64url(value)}`;
}

/**
 * The back-channel logout link of an AS session id (`sid`) at a provider:
 * the default provider's as it always was, a named provider's with its
 * name, so a `sid` that two providers both use never names the other's
 * user (README "Several identity providers").
 */
export function providerLogoutLinkName(provider: string, sid: string): string {
  return provider === 'default' ? logoutLinkName('sid', sid) : logoutLinkName('sid', `${provider}\n${sid}`);
}
