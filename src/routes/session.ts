import type { FastifyInstance } from 'fastify';
import { gatehouseError } from '../errors.js';
import { resolveSessionId } from '../access/resolve.js';

/**
 * Claims that describe a token or the sign-in event, not the user (OpenID
 * Connect Core §2 and §3.1.3.6): a page showing "who is signed in" would
 * only be confused by them. `exp` above all: it is the ID token's expiry,
 * minutes away, while the session lives until `expiresAt` (README "GET
 * /session"). test/session/session-endpoint.test.ts pins the list.
 */
const PROTOCOL_CLAIMS: ReadonlySet<string> = new Set(['nonce', 'at_hash', 'c_hash', 's_hash', 'azp', 'aud', 'auth_time', 'iat', 'exp', 'nbf', 'jti', 'sid']);

/** GET /session: who is signed in, how (`acr`, `auth_time`) and until when; never a token. */
export async function sessionRoute(fastify: FastifyInstance): Promise<void> {
  fastify.get(fastify.gatehouse.config.paths.session, { config: { routeClass: 'session' } }, async (request, reply) => {
    const site = request.site ?? fastify.gatehouse.site;
    const resolved = await resolveSessionId(fastify.gatehouse, request.cookies[fastify.gatehouse.cookies.sessionName], request.log, undefined, site.provider);
    if (!resolved) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
    const user = Object.fromEntries(Object.entries(resolved.tokens.claims).filter(([name]) => !PROTOCOL_CLAIMS.has(name)));
    // expiresAt: when the session ends (session.ttl from sign-in, or earlier by idleTimeout); the only expiry shown.
    // acr and auth_time of the sign-in behind this session, so a page can tell whether a route's step-up is met before it calls (README "Step-up").
    const { acr, authTime } = resolved.session;
    return reply
      .header('cache-control', 'no-store')
      .send({ user, expiresAt: new Date(resolved.session.expiresAt).toISOString(), acr: acr ?? null, auth_time: authTime ?? null });
  });
}
