import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
/**
 * The Prometheus metrics of one gateway instance, in a registry of its own
 * so several gateways can run in one process (tests).
 */
export class Metrics {
    registry = new Registry();
    requests = new Counter({
        name: 'gatehouse_http_requests_total',
        help: 'Requests answered, by route class and status code',
        labelNames: ['route', 'status'],
        registers: [this.registry],
    });
    logins = new Counter({
        name: 'gatehouse_logins_total',
        help: 'Completed callbacks, by result (ok or the failure reason)',
        labelNames: ['result'],
        registers: [this.registry],
    });
    refreshes = new Counter({
        name: 'gatehouse_token_refreshes_total',
        help: 'Access-token refreshes: ok, failed, or joined (waited for a refresh already under way)',
        labelNames: ['result'],
        registers: [this.registry],
    });
    upstreamDuration = new Histogram({
        name: 'gatehouse_upstream_request_duration_seconds',
        help: 'Time from sending a request upstream to its response headers',
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
        registers: [this.registry],
    });
    /** @param countSessions the store-wide session count; without it the gauge is absent (SPEC §8) */
    constructor(countSessions) {
        collectDefaultMetrics({ register: this.registry });
        if (!countSessions)
            return;
        const activeSessions = new Gauge({
            name: 'gatehouse_active_sessions',
            help: 'Live sessions in the store (store-wide, the same on every replica)',
            registers: [],
            async collect() {
                this.set(await countSessions());
            },
        });
        this.registry.registerMetric(activeSessions);
    }
}
//# sourceMappingURL=metrics.js.map