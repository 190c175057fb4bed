import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import type { Readiness } from './readiness.js';
import { sessionApi, type SessionApiOptions } from './sessions.js';

/**
 * The admin app (README "Observe"), on its own listener that is never exposed:
 * liveness, readiness (provider metadata loaded, store answered within 5 s,
 * not shutting down), Prometheus metrics and, with `admin.token`, the
 * session API (README "Ending sessions"), given `sessions` (only with it).
 */
export async function buildAdmin(
  metrics: Pick<Metrics, 'registry'>,
  readiness: Readiness,
  logger: Logger,
  sessions?: SessionApiOptions,
): Promise<FastifyInstance> {
  const admin = Fastify({ loggerInstance: logger.child({ listener: 'admin' }) as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
  admin.get('/healthz', async () => ({ status: 'ok' }));
  admin.get('/readyz', async (_request, reply) => {
    const { ready, ...checks } = readiness.check();
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', ...checks });
  });
  admin.get('/metrics', async (_request, reply) => {
    const registry = metrics.registry;
    return reply.type(registry.contentType).send(await registry.metrics());
  });
  if (sessions !== undefined) sessionApi(admin, sessions);
  return admin;
}
