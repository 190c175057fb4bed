import type { FastifyInstance } from 'fastify';
import { gatehouseError } from '../errors.js';

/** How long a verifier may keep the key set: a new key is published second for at least this long before it signs. */
const MAX_AGE_S = 300;

/**
 * GET `paths.jwks` (README "Identity assertion"): the public keys of
 * `assertion.signingKeys` as a JWK Set (RFC 7517), for upstreams that verify
 * identity assertions; never a private part. Only with signing keys: without
 * them the path is an ordinary one.
 */
export async function jwksRoute(fastify: FastifyInstance): Promise<void> {
  const { config, assertions } = fastify.gatehouse;
  if (assertions === undefined) return;
  const body = JSON.stringify(assertions.jwks);
  fastify.route({
    method: ['GET', 'HEAD'],
    url: config.paths.jwks,
    config: { routeClass: 'session' },
    handler: async (_request, reply) =>
      reply.header('cache-control', `public, max-age=${MAX_AGE_S}`).type('application/json').send(body),
  });
  // Never proxied: another method on this path is refused here rather than sent upstream.
  fastify.route({
    method: ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: config.paths.jwks,
    config: { routeClass: 'session' },
    handler: async () => {
      throw gatehouseError('GH_ERR_METHOD_NOT_ALLOWED');
    },
  });
}
