import type { FastifyInstance } from 'fastify';
import { gatehouseError } from '../errors.js';
import { resolveSession } from '../plugins/session.js';

/** GET /session: who is signed in and until when; never a token. */
export async function sessionRoute(fastify: FastifyInstance): Promise<void> {
  fastify.get(fastify.gatehouse.config.paths.session, { config: { routeClass: 'session' } }, async (request, reply) => {
    const resolved = await resolveSession(request);
    if (!resolved) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
    return reply
      .header('cache-control', 'no-store')
      .send({ user: resolved.tokens.claims, expiresAt: new Date(resolved.session.expiresAt).toISOString() });
  });
}
