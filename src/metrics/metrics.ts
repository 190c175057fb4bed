import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { FastHistogram } from './fast-histogram.js';

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The gateway's own route classes of `gatehouse_http_requests_total` (README "Observe"); proxied requests carry their route's label. */
export type RouteClass = 'login' | 'callback' | 'logout' | 'session' | 'forward-auth';

/** The route classes every gateway has. */
export const GATEWAY_ROUTE_CLASSES: readonly RouteClass[] = ['login', 'callback', 'logout', 'session'];
const LOGIN_RESULTS = ['ok', 'denied', 'invalid_state', 'provider_unavailable', 'no_user_id', 'rejected', 'step_up_not_met'];
const REFRESH_RESULTS = ['ok', 'failed', 'joined'];

/** Results of `gatehouse_bearer_requests_total` (README "Machine clients"). */
export type BearerResult = 'accepted' | 'invalid' | 'refused' | 'unavailable';
const BEARER_RESULTS: readonly BearerResult[] = ['accepted', 'invalid', 'refused', 'unavailable'];

/**
 * The Prometheus metrics of one gateway instance, in a registry of its own
 * so several gateways can run in one process (tests).
 */
export class Metrics {
  readonly registry = new Registry();
  readonly logins = new Counter({
    name: 'gatehouse_logins_total',
    help: 'Completed callbacks, by result (ok or the failure reason)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  /** By `target`: `sign-in` for the sign-in tokens, else a token target's label (README "A token for each API"). */
  readonly refreshes = new Counter({
    name: 'gatehouse_token_refreshes_total',
    help: 'Access-token refreshes and token-target grants, by target: ok, failed, or joined (waited for one already under way)',
    labelNames: ['target', 'result'] as const,
    registers: [this.registry],
  });
  /** Time from receiving a request to sending the last byte of its response, by route class. */
  readonly requestDuration = new FastHistogram(
    'gatehouse_http_request_duration_seconds',
    'Time from receiving a request to sending the last byte of its response, by route class',
    DURATION_BUCKETS,
    'route',
  );
  /** Time from sending a request upstream to its response headers. */
  readonly upstreamDuration = new FastHistogram(
    'gatehouse_upstream_request_duration_seconds',
    'Time from sending a request upstream to its response headers',
    DURATION_BUCKETS,
  );

  /** Requests that presented a machine client's bearer token on a route that accepts one, by result. */
  readonly bearerRequests = new Counter({
    name: 'gatehouse_bearer_requests_total',
    help: 'Requests with a machine client bearer token on a bearer route: accepted, invalid (401), refused by allow (403), unavailable (503)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  /** `bearerRequests` by result, its labels resolved once: counting is one addition per request. */
  readonly bearerResults: Readonly<Record<BearerResult, { inc(): void }>> = Object.fromEntries(
    BEARER_RESULTS.map((result) => [result, this.bearerRequests.labels({ result })]),
  ) as Record<BearerResult, { inc(): void }>;

  /** Open proxied WebSockets (README "WebSockets and server-sent events"). */
  readonly websocketConnections = new Gauge({
    name: 'gatehouse_websocket_connections',
    help: 'Open proxied WebSocket connections',
    registers: [this.registry],
  });

  /** Requests answered since the last scrape, by `route status`; added to `requests` when scraped. */
  readonly #unscraped = new Map<string, number>();

  /**
   * Counts one answered request and its duration: two map updates, the label
   * hashing left to the scrape. `site`: with `sites`, the request's site
   * (README "Several sites"; '' for a host no site has); undefined without.
   */
  countRequest(route: string, status: number, seconds: number, site?: string): void {
    const key = site === undefined ? `${route} ${status}` : `${route} ${status} ${site}`;
    this.#unscraped.set(key, (this.#unscraped.get(key) ?? 0) + 1);
    this.requestDuration.observe(seconds, route);
  }

  /**
   * @param routeLabels every label of `gatehouse_http_requests_total` this gateway can count: its own route classes and its routes' labels
   * @param countSessions the store-wide session count; without it the gauge is absent (README "Observe")
   * @param targetLabels every `target` of `gatehouse_token_refreshes_total`: `sign-in` and the token targets' labels (README "A token for each API")
   * @param siteLabels with `sites`: each site's name (the `site` label of `gatehouse_http_requests_total`, README "Several sites") and its routes' labels; without, no such label
   */
  constructor(routeLabels: readonly string[], countSessions?: () => Promise<number>, targetLabels: readonly string[] = ['sign-in'], siteLabels?: ReadonlyMap<string, readonly string[]>) {
    // Every label value from start-up, at 0 until it happens: "nothing failed" is not "no data" (README "Observe").
    for (const result of LOGIN_RESULTS) this.logins.inc({ result }, 0);
    for (const target of targetLabels) {
      for (const result of REFRESH_RESULTS) this.refreshes.inc({ target, result }, 0);
    }
    for (const result of BEARER_RESULTS) this.bearerRequests.inc({ result }, 0);
    const unscraped = this.#unscraped;
    const requestsTotal = new Counter({
      name: 'gatehouse_http_requests_total',
      help: 'Requests answered, by route class and status code',
      labelNames: siteLabels === undefined ? ['route', 'status'] : ['route', 'status', 'site'],
      registers: [this.registry],
      collect() {
        for (const [key, count] of unscraped) {
          const [route, status, site] = key.split(' ') as [string, string, string | undefined];
          this.inc(site === undefined ? { route, status } : { route, status, site }, count);
        }
        unscraped.clear();
      },
    });
    if (siteLabels === undefined) for (const route of routeLabels) requestsTotal.inc({ route, status: '200' }, 0);
    else {
      for (const [site, routes] of siteLabels) {
        for (const route of [...routeLabels.filter((label) => !label.startsWith('/') && label !== 'proxy'), ...routes]) requestsTotal.inc({ route, status: '200', site }, 0);
      }
    }
    this.registry.registerMetric(this.requestDuration.asMetric());
    this.registry.registerMetric(this.upstreamDuration.asMetric());
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
