import { startHarness, type Harness, type HarnessOptions } from './harness.js';
import { startAudienceUpstream, type AudienceUpstream } from './audience-upstream.js';

/** The resource indicator of the orders API and the audience its tokens carry. */
export const ORDERS = 'https://orders.example.com';
export const ORDERS_AUDIENCE = 'orders-api';
/** The audience the ledger API's exchanged tokens carry. */
export const LEDGER = 'ledger';

/** Three APIs that each check the audience of their token (README "A token for each API"). */
export interface TargetsHarness extends Harness {
  /** Wants the sign-in token: no audience. */
  plain: AudienceUpstream;
  /** Wants a token for ORDERS with orders.read. */
  orders: AudienceUpstream;
  /** Wants an exchanged token for LEDGER with ledger.read. */
  ledger: AudienceUpstream;
}

/**
 * A real oidc-provider with resource indicators on (audience-restricted tokens
 * per `resource`) and a token-exchange grant, and a gateway with three routes:
 * `/api/plain` (`token: access`), `/api/orders` (`token: {resource, scopes}`)
 * and `/api/ledger` (`token: {exchange}`), each to an upstream that introspects
 * its token and refuses one of another audience. `routes` may replace the routes.
 */
export async function startTargetsHarness(
  options: HarnessOptions & { routes?: (h: Pick<TargetsHarness, 'plain' | 'orders' | 'ledger'>) => Array<Record<string, unknown>> } = {},
): Promise<TargetsHarness> {
  const upstreams = {
    plain: await startAudienceUpstream(undefined),
    orders: await startAudienceUpstream(ORDERS_AUDIENCE, ['orders.read']),
    ledger: await startAudienceUpstream(LEDGER, ['ledger.read']),
  };
  const routes = options.routes?.(upstreams) ?? [
    { path: '/api/plain', upstream: upstreams.plain.url, token: 'access' },
    { path: '/api/orders', upstream: upstreams.orders.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
    { path: '/api/ledger', upstream: upstreams.ledger.url, token: { exchange: { audience: LEDGER, scopes: ['ledger.read'] } } },
  ];
  const extra = options.config;
  const harness = await startHarness({
    resourceServers: { [ORDERS]: { audience: ORDERS_AUDIENCE, scopes: ['orders.read', 'orders.write'] } },
    tokenExchange: { [LEDGER]: { audience: LEDGER, scopes: ['ledger.read'] } },
    ...options,
    config: (as) => ({ ...(typeof extra === 'function' ? extra(as) : (extra ?? {})), routes }),
  });
  for (const upstream of Object.values(upstreams)) upstream.as = harness.as;
  const close = harness.close;
  return Object.assign(harness, upstreams, {
    async close() {
      await close();
      await Promise.all(Object.values(upstreams).map((upstream) => upstream.close()));
    },
  });
}
