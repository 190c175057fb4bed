import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import { gatehouseError } from '../errors.js';
import type { RouteClass } from '../metrics/metrics.js';

/** Routes that start or finish a sign-in: each costs the AS a round trip, so a client address may only make so many. */
const LIMITED: ReadonlySet<RouteClass> = new Set(['login', 'callback']);

/**
 * Limits requests to the login path and to the callback path, each per
 * client address (`rateLimit.max` per `rateLimit.window`, counted in this
 * process); proxied
 * paths are not limited and pay nothing for it. Behind a load balancer set
 * `server.trustProxy` so that the address is the browser's, not the balancer's.
 */
export const rateLimitPlugin = fp(
  async (fastify) => {
    const { max, window } = fastify.gatehouse.config.rateLimit;
    if (max === 0) return;
    fastify.addHook('onRoute', (route) => {
      const routeClass = route.config?.routeClass;
      if (routeClass !== undefined && LIMITED.has(routeClass)) route.config = { ...route.config, rateLimit: {} };
    });
    await fastify.register(rateLimit, {
      global: false,
      max,
      timeWindow: window * 1000,
      errorResponseBuilder: () => gatehouseError('GH_ERR_RATE_LIMITED'),
    });
  },
  { name: 'gatehouse-rate-limit', fastify: '5.x', dependencies: ['gatehouse-context'] },
);
