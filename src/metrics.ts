import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Route classes of `gatehouse_http_requests_total` (SPEC §8). */
export type RouteClass = 'login' | 'callback' | 'logout' | 'session' | 'proxy';

/**
 * The Prometheus metrics of one gateway instance, in a registry of its own
 * so several gateways can run in one process (tests).
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'gatehouse_http_requests_total',
    help: 'Requests answered, by route class and status code',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  readonly logins = new Counter({
    name: 'gatehouse_logins_total',
    help: 'Completed callbacks, by result (ok or the failure reason)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly refreshes = new Counter({
    name: 'gatehouse_token_refreshes_total',
    help: 'Access-token refreshes: ok, failed, or joined (waited for a refresh already under way)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'gatehouse_http_request_duration_seconds',
    help: 'Time from receiving a request to sending the last byte of its response, by route class',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly upstreamDuration = new Histogram({
    name: 'gatehouse_upstream_request_duration_seconds',
    help: 'Time from sending a request upstream to its response headers',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /** Label children by `route status`, so that counting a request does not hash its labels every time. */
  readonly #requestCounters = new Map<string, { inc(): void }>();
  readonly #requestTimers = new Map<string, { observe(value: number): void }>();

  /** Counts one answered request and its duration. */
  countRequest(route: RouteClass, status: number, seconds: number): void {
    const key = `${route} ${status}`;
    let counter = this.#requestCounters.get(key);
    if (counter === undefined) {
      counter = this.requests.labels(route, String(status));
      this.#requestCounters.set(key, counter);
    }
    counter.inc();
    let timer = this.#requestTimers.get(route);
    if (timer === undefined) {
      timer = this.requestDuration.labels(route);
      this.#requestTimers.set(route, timer);
    }
    timer.observe(seconds);
  }

  /** @param countSessions the store-wide session count; without it the gauge is absent (SPEC §8) */
  constructor(countSessions?: () => Promise<number>) {
    collectDefaultMetrics({ register: this.registry });
    if (!countSessions) return;
    const activeSessions = new Gauge({
      name: 'gatehouse_active_sessions',
      help: 'Live sessions in the store (store-wide, the same on every replica)',
      registers: [],
      async collect() {
        // A store that is down must not turn the whole scrape into an error: the gauge keeps its last value.
        await countSessions().then(
          (count) => this.set(count),
          () => undefined,
        );
      },
    });
    this.registry.registerMetric(activeSessions);
  }
}
