import type { FastifyRequest } from 'fastify';
import { hashSessionId, isSessionIdShaped } from '../session/seal.js';
import type { SessionRecord, TokenRecord } from '../session/store.js';

/** A browser's live session and the token record it shares with the user's other sessions. */
export interface ResolvedSession {
  /** SHA-256 of the session id: the only form the gateway keeps. */
  hash: string;
  session: SessionRecord;
  tokens: TokenRecord;
}

/**
 * Cookie -> session -> token record. Null when there is no cookie, the id
 * is unknown or expired, or the user's record no longer lists this session
 * (it was ended with all of the user's sessions). With a warm cache this is
 * one hash and two LRU lookups, no I/O.
 */
export async function resolveSession(request: FastifyRequest): Promise<ResolvedSession | null> {
  const { store, cookies } = request.server.gatehouse;
  const sessionId = request.cookies[cookies.sessionName];
  if (sessionId === undefined || !isSessionIdShaped(sessionId)) return null;
  const hash = hashSessionId(sessionId);
  const session = await store.getSession(hash);
  if (!session) return null;
  const tokens = await store.getTokens(session.userId);
  if (!tokens || tokens.sessions[hash] === undefined) {
    await store.deleteSession(hash);
    return null;
  }
  return { hash, session, tokens };
}
