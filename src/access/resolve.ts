import type { FastifyBaseLogger } from 'fastify';
import type { GatewayContext } from '../context.js';
import { hashSessionId, isSessionIdShaped } from '../session/session-id.js';
import type { SessionRecord, TokenRecord } from '../session/store.js';
import { endSessionsAndRevoke } from '../oauth/revocation.js';
import { DEFAULT_PROVIDER } from '../oauth/providers.js';

/** A browser's live session and the token record it shares with the user's other sessions. */
export interface ResolvedSession {
  /** SHA-256 of the session id: the only form the gateway keeps. */
  hash: string;
  session: SessionRecord;
  tokens: TokenRecord;
}

/**
 * The share of `session.idleTimeout` after which a use is written to the
 * store again: a busy session costs one write per tenth of the idle timeout,
 * not one per request, and ends between 90% and 100% of the idle timeout
 * after its last request (never later).
 */
const IDLE_WRITE_FRACTION = 10;

/**
 * {@link resolveSessionId} when the in-process cache alone can answer, without
 * a promise (the hot path); undefined when the store must be read or
 * written (a miss, a use to record for the idle timeout, a session to end).
 * Throws GH_ERR_STORE_UNAVAILABLE while the store is down.
 */
export function resolveCached(context: GatewayContext, sessionId: string | undefined, now: number, provider?: string): ResolvedSession | null | undefined {
  if (sessionId === undefined || !isSessionIdShaped(sessionId)) return null;
  const { store } = context;
  const hash = hashSessionId(sessionId);
  const session = store.peekSession(hash, now);
  if (session === null || (session !== undefined && !ofProvider(session, provider))) return null;
  if (session === undefined || !usedRecently(context, session, now)) return undefined;
  const tokens = store.peekTokens(session.userId);
  if (tokens === undefined || tokens.sessions[hash] === undefined) return undefined;
  // A Set lookup; the first use in a minute is written in the background (the session API's lastSeenAt).
  store.noteSeen(hash, now, session.expiresAt);
  return { hash, session, tokens };
}

/** Whether the session's last recorded use is recent enough that this one need not be written (or end it). */
function usedRecently(context: GatewayContext, session: SessionRecord, now: number): boolean {
  const idleMs = context.config.session.idleTimeout * 1000;
  return idleMs <= 0 || (session.seenAt !== undefined && now - session.seenAt < idleMs / IDLE_WRITE_FRACTION);
}

/**
 * Session cookie value -> session -> token record, for every way in (a
 * proxied request, a WebSocket upgrade, forward-auth, the gateway's own
 * paths). Null when there is no cookie, the id is unknown or expired, the
 * session has been idle longer than `session.idleTimeout` (it is then
 * ended), or the user's record no longer lists this session (it was ended
 * with all of the user's sessions). With a warm cache this is one hash and
 * two LRU lookups, no I/O.
 */
export async function resolveSessionId(
  context: GatewayContext,
  sessionId: string | undefined,
  log: FastifyBaseLogger,
  now = context.clock.now(),
  provider?: string,
): Promise<ResolvedSession | null> {
  const cached = resolveCached(context, sessionId, now, provider);
  return cached === undefined ? resolveStored(context, sessionId!, log, now, provider) : cached;
}

/**
 * Whether a session may be used where `provider` signs in (a site's
 * provider, README "Several identity providers"): a session made with
 * another provider is no session there. Undefined accepts every provider
 * (a sign-out, which ends whatever session the browser has).
 */
function ofProvider(session: SessionRecord, provider: string | undefined): boolean {
  return provider === undefined || (session.provider ?? DEFAULT_PROVIDER) === provider;
}

/**
 * The part of {@link resolveSessionId} that reads or writes the store: for a
 * session id that {@link resolveCached} could not decide (never undefined then).
 */
export async function resolveStored(context: GatewayContext, sessionId: string, log: FastifyBaseLogger, now: number, provider?: string): Promise<ResolvedSession | null> {
  const { store, config } = context;
  const hash = hashSessionId(sessionId);
  let session = await store.getSession(hash, now);
  if (!session || !ofProvider(session, provider)) return null;
  const idleMs = config.session.idleTimeout * 1000;
  if (idleMs > 0) {
    const seenAt = session.seenAt ?? now;
    if (now - seenAt > idleMs) {
      await endIdleSession(context, log, hash, session.userId);
      return null;
    }
    if (session.seenAt === undefined || now - seenAt >= idleMs / IDLE_WRITE_FRACTION) {
      session = { ...session, seenAt: now };
      await store.saveSession(hash, session, now);
    }
  }
  let tokens = await store.getTokens(session.userId);
  if (!tokens || tokens.sessions[hash] === undefined) {
    // The cached record may predate this session (a login on another replica):
    // only the stored record may end it (test/store/read-write-race.test.ts).
    tokens = await store.getTokens(session.userId, true);
    if (!tokens || tokens.sessions[hash] === undefined) {
      await store.deleteSession(hash);
      return null;
    }
  }
  store.noteSeen(hash, now, session.expiresAt);
  return { hash, session, tokens };
}

/** Ends a session that was idle too long, as a logout would: the last of the user's sessions revokes the refresh token. */
async function endIdleSession(context: GatewayContext, log: FastifyBaseLogger, hash: string, userId: string): Promise<void> {
  const result = await endSessionsAndRevoke(context, log, userId, hash, (candidate) => candidate === hash);
  log.info({ userId: result?.record.user ?? userId }, 'idle session ended');
}
