import fp from 'fastify-plugin';
import type { Logger } from 'pino';

declare module 'fastify' {
  interface FastifyRequest {
    /** Forward-auth: the original request the proxy asked about, which the access-log line names. */
    decided: { method: string; path: string } | undefined;
  }
}

/**
 * After every response of the public app: counts it in
 * `gatehouse_http_requests_total` and the duration histogram under its route
 * class, and logs one `request completed` line at info (path without the
 * query, which may hold codes or state; the client address per `server.trustProxy`). `logger` is the gateway's root logger.
 */
export const accessLogPlugin = fp<{ logger: Logger }>(
  async (fastify, { logger }) => {
    const { metrics, sites } = fastify.gatehouse;
    const several = sites.several;
    fastify.decorateRequest('decided', undefined);
    // Synchronous, and the line built without spreads: this runs once per request (BENCHMARKS.md "Access log").
    fastify.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.config.routeClass ?? request.exchange?.route.label ?? 'proxy';
      metrics.countRequest(route, reply.statusCode, reply.elapsedTime / 1000, several ? (request.site?.name ?? '') : undefined);
      if (logger.isLevelEnabled('info')) {
        const query = request.url.indexOf('?');
        const line: Record<string, unknown> = {
          method: request.method,
          path: query < 0 ? request.url : request.url.slice(0, query),
          client: request.ip,
          route,
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 10) / 10,
        };
        if (request.userId !== undefined) line.userId = request.userId;
        if (request.auth !== undefined) line.auth = request.auth;
        if (request.errorCode !== undefined) line.code = request.errorCode;
        const decided = request.decided;
        if (decided !== undefined) {
          line.originalMethod = decided.method;
          line.originalPath = decided.path;
        }
        const seconds = request.exchange?.seconds ?? -1;
        if (seconds >= 0) line.upstreamMs = Math.round(seconds * 10_000) / 10;
        request.log.info(line, 'request completed');
      }
      done();
    });
  },
  { name: 'gatehouse-access-log', fastify: '5.x', dependencies: ['gatehouse-context'] },
);
