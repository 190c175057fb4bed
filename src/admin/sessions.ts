import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { errorRow, isGatehouseError } from '../errors.js';
import { openIdUserKey, plainUserKey } from '../oauth/identify.js';
import type { ProviderRegistry } from '../oauth/providers.js';
import { endEverySession, revokeAtItsProvider } from '../oauth/revocation.js';
import { endSessions } from '../session/ending.js';
import { SessionHandles } from '../session/handle.js';
import type { SessionStore } from '../session/store.js';
import { handleLinkName, userLinkName } from '../session/user-links.js';

/** What the session API works with. */
export interface SessionApiOptions {
  /** `admin.token`: the bearer every call must present. */
  token: string;
  store: SessionStore;
  /** The identity providers: a user's sessions are revoked at the provider of their record; without `?iss=` the default provider's issuer is meant. */
  providers: ProviderRegistry;
  handles: SessionHandles;
  /** `provider.userIdClaim`: with `sub`, a user's record key follows from the user id alone. */
  userIdClaim: string;
  /** `provider.issuer`, for when the provider's metadata is not loaded yet. */
  issuer: string | undefined;
}

/** One session as the API lists it: never its id or its hash. */
interface ListedSession {
  handle: string;
  createdAt: string | null;
  expiresAt: string;
  lastSeenAt: string | null;
}

type UserQuery = Record<string, string | string[] | undefined>;

/**
 * The session API on the admin listener (README "Ending sessions"):
 * `GET /sessions?user=` lists a user's sessions, `DELETE /sessions?user=`
 * ends them all and revokes the refresh token (as a logout everywhere does),
 * `DELETE /sessions/<handle>` ends one. The store is the one every replica
 * shares, so what is listed and ended is every replica's; an ended session's
 * browser gets 401 on its next request wherever it lands, and its WebSockets
 * close at the next sweep of the open sockets (src/websocket/open-sockets.ts).
 * Registered only when `admin.token` is set: without it these paths are 404.
 *
 * @example
 * if (config.admin.token !== undefined) sessionApi(admin, { token: config.admin.token, store, provider, handles, userIdClaim: 'sub', issuer });
 */
export function sessionApi(admin: FastifyInstance, options: SessionApiOptions): void {
  const { store, providers, handles } = options;
  const provider = providers.default.provider;
  const expected = digest(options.token);

  admin.register(async (api) => {
    api.addHook('onRequest', async (request, reply) => {
      if (!authorized(request.headers.authorization, expected)) {
        request.log.warn({ caller: request.ip, method: request.method }, 'session api call refused: bad or missing admin token');
        return reply.code(401).header('www-authenticate', 'Bearer realm="gatehouse-admin"').send({ error: 'unauthorized' });
      }
    });
    api.setErrorHandler(async (err, request, reply) => {
      if (isGatehouseError(err)) {
        if (err.statusCode >= 500) request.log.warn({ err }, 'session api call failed');
        return reply.code(err.statusCode).send({ error: errorRow(err.code).slug, message: err.message });
      }
      const status = (err as { statusCode?: number }).statusCode;
      if (status !== undefined && status >= 400 && status < 500) return reply.code(status).send({ error: 'bad_request' });
      request.log.error({ err }, 'session api call failed');
      return reply.code(500).send({ error: 'internal_error' });
    });

    api.get<{ Querystring: UserQuery }>('/sessions', async (request, reply) => {
      const { user, iss } = userParameters(request.query);
      if (user === undefined) return badRequest(reply, 'give the user id as ?user= (and ?iss= with several issuers)');
      const sessions: ListedSession[] = [];
      for (const userId of await recordKeys(user, iss)) sessions.push(...(await listSessions(userId)));
      request.log.info({ caller: request.ip, userId: user, sessions: sessions.length }, 'sessions listed');
      return reply.header('cache-control', 'no-store').send({ sessions });
    });

    api.delete<{ Querystring: UserQuery }>('/sessions', async (request, reply) => {
      const { user, iss } = userParameters(request.query);
      if (user === undefined) return badRequest(reply, 'give the user id as ?user= (and ?iss= with several issuers)');
      let ended = 0;
      for (const userId of await recordKeys(user, iss)) ended += (await endEverySession(store, providers, userId, request.log))?.ended ?? 0;
      request.log.info({ caller: request.ip, userId: user, sessions: ended }, 'every session of the user ended by the session api');
      return reply.header('cache-control', 'no-store').send({ ended });
    });

    api.delete<{ Params: { handle: string } }>('/sessions/:handle', async (request, reply) => {
      const { handle } = request.params;
      if (!SessionHandles.isShaped(handle)) return badRequest(reply, 'a session handle is 22 characters of base64url, as GET /sessions lists it');
      const userId = await store.getLink(handleLinkName(handle));
      const result = userId === null ? null : await endSessions(store, userId, (hash) => handles.of(hash) === handle);
      // The last session out revokes the refresh token, as a logout does.
      if (result?.lastOut && result.ended > 0) await revokeAtItsProvider(providers, result.record, request.log);
      const ended = result?.ended ?? 0;
      request.log.info({ caller: request.ip, session: handle, sessions: ended, ...(result ? { userId: result.record.user ?? result.record.userId } : {}) }, 'session ended by the session api');
      return reply.header('cache-control', 'no-store').send({ ended });
    });
  });

  /**
   * The record keys a user id may stand for: the link written at sign-in
   * (README "Ending sessions"), and, for sessions from before links were
   * written, the key that follows from the id alone (`iss` + `sub` when
   * `userIdClaim` is `sub`; the id itself from a plain OAuth 2.0 server).
   */
  async function recordKeys(user: string, iss: string | undefined): Promise<string[]> {
    const openId = options.issuer !== undefined;
    const issuer = iss ?? (openId ? (provider.ready ? provider.configuration.serverMetadata().issuer : options.issuer!) : '');
    const keys = new Set<string>();
    const linked = await store.getLink(userLinkName(issuer, user));
    if (linked !== null) keys.add(linked);
    if (openId && options.userIdClaim === 'sub') keys.add(openIdUserKey(issuer, user));
    if (!openId) keys.add(plainUserKey(user));
    return [...keys];
  }

  async function listSessions(userId: string): Promise<ListedSession[]> {
    const record = await store.getTokens(userId, true);
    if (!record) return [];
    const now = Date.now();
    const listed: ListedSession[] = [];
    for (const [hash, expiresAt] of Object.entries(record.sessions)) {
      if (expiresAt <= now) continue;
      const session = await store.getSession(hash, now);
      if (!session || session.userId !== userId) continue;
      const seen = Math.max((await store.lastSeen(hash)) ?? 0, session.seenAt ?? 0, session.createdAt ?? 0);
      const handle = handles.of(hash);
      // A session from before handles were linked at sign-in becomes endable by the handle listed here.
      await store.saveLink(handleLinkName(handle), userId, session.expiresAt - now);
      listed.push({
        handle,
        createdAt: session.createdAt === undefined ? null : new Date(session.createdAt).toISOString(),
        expiresAt: new Date(session.expiresAt).toISOString(),
        lastSeenAt: seen === 0 ? null : new Date(seen).toISOString(),
      });
    }
    return listed;
  }
}

/** `?user=` and `?iss=`, each at most once; undefined user when missing, empty or repeated. */
function userParameters(query: UserQuery): { user: string | undefined; iss: string | undefined } {
  const single = (value: string | string[] | undefined) => (typeof value === 'string' && value.length > 0 && value.length <= 512 ? value : undefined);
  return { user: single(query.user), iss: single(query.iss) };
}

function badRequest(reply: FastifyReply, message: string): FastifyReply {
  return reply.code(400).send({ error: 'bad_request', message });
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Whether the Authorization header carries the admin token. Both sides are
 * hashed to equal lengths first, so the comparison takes the same time
 * whatever the header holds (timingSafeEqual needs equal lengths).
 */
function authorized(header: string | undefined, expected: Buffer): boolean {
  if (header === undefined || header.length > 4096) return false;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  return match !== null && timingSafeEqual(digest(match[1]!), expected);
}
