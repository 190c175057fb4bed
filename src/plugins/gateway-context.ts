import fp from 'fastify-plugin';
import type { GatewayContext } from '../context.js';
import type { RouteClass } from '../metrics/metrics.js';

declare module 'fastify' {
  interface FastifyInstance {
    gatehouse: GatewayContext;
  }
  interface FastifyContextConfig {
    /** Which `gatehouse_http_requests_total` route label a route counts under. */
    routeClass?: RouteClass;
  }
}

/** Decorates the instance with the shared GatewayContext. */
export const gatewayContextPlugin = fp<{ context: GatewayContext }>(
  async (fastify, { context }) => {
    fastify.decorate('gatehouse', context);
  },
  { name: 'gatehouse-context', fastify: '5.x' },
);
