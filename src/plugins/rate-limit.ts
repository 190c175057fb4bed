import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import { gatehouseError } from '../errors.js';
import type { RouteClass } from '../metrics/metrics.js';
import type { SessionStore } from '../session/store.js';

/** Routes that start or finish a sign-in: each costs the AS a round trip, so a client address may only make so many. */
const LIMITED: ReadonlySet<RouteClass> = new Set(['login', 'callback']);

type CountHit = NonNullable<SessionStore['countHit']>;
type Counted = (error: Error | null, result?: { current: number; ttl: number }) => void;

/**
 * @fastify/rate-limit's store interface over the session store's shared
 * counter (a Redis store): every replica counts into the same window, so
 * three replicas do not allow three times `rateLimit.max`. (Its own Redis
 * store needs an ioredis client; the session store speaks node-redis.)
 */
function sharedCounterStore(countHit: CountHit, windowMs: number) {
  return class SharedCounter {
    /** @fastify/rate-limit passes its options first; a child passes its key prefix second. */
    constructor(
      _options: unknown,
      readonly prefix = '',
    ) {}

    incr(key: string, done: Counted): void {
      countHit(`${this.prefix}${key}`, windowMs).then(({ count, ttlMs }) => done(null, { current: count, ttl: ttlMs }), done);
    }

    /**
     * One counter per limited route: `login:<address>`, `callback:<address>`.
     * @fastify/rate-limit passes the route's merged limit options, the route under `routeInfo` (its typings say otherwise).
     */
    child(options: unknown): SharedCounter {
      const route = (options as { routeInfo: { url: string; config?: { routeClass?: string } } }).routeInfo;
      return new SharedCounter(undefined, `${route.config?.routeClass ?? route.url}:`);
    }
  };
}

/**
 * Limits requests to the login path and to the callback path, each per
 * client address (`rateLimit.max` per `rateLimit.window`), counted across
 * every replica when the session store is shared (Redis), else in this
 * process; proxied paths are not limited and pay nothing for it. The
 * address is the one `server.trustProxy` yields (src/http/client-address.ts):
 * behind a load balancer set it, or every browser shares the balancer's address.
 * With the store down, a limited request gets 503, as the callback would.
 */
export const rateLimitPlugin = fp(
  async (fastify) => {
    const { config, store } = fastify.gatehouse;
    const { max, window } = config.rateLimit;
    if (max === 0) return;
    fastify.addHook('onRoute', (route) => {
      const routeClass = route.config?.routeClass;
      if (routeClass !== undefined && LIMITED.has(routeClass)) route.config = { ...route.config, rateLimit: {} };
    });
    const countHit = store.shared ? store.countHit : undefined;
    await fastify.register(rateLimit, {
      global: false,
      max,
      timeWindow: window * 1000,
      ...(countHit ? { store: sharedCounterStore(countHit, window * 1000) } : {}),
      errorResponseBuilder: () => gatehouseError('GH_ERR_RATE_LIMITED'),
    });
  },
  { name: 'gatehouse-rate-limit', fastify: '5.x', dependencies: ['gatehouse-context'] },
);
