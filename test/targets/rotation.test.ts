import t from 'tap';
import { signIn } from '../helpers/sign-in.js';
import { startTargetsHarness, LEDGER, ORDERS, ORDERS_AUDIENCE } from '../helpers/targets-harness.js';
import { startAudienceUpstream } from '../helpers/audience-upstream.js';
import { storedTokens } from '../helpers/refresh.js';
import { introspect } from '../helpers/authorization-server-watch.js';
import { TestClock } from '../helpers/clock.js';

// README "A token for each API": with refresh-token rotation (the demo AS rotates on every refresh), grants of one
// user run one at a time under the user's lock and always present the newest refresh token; stale tokens are renewed.
const INVENTORY = 'https://inventory.example.com';
const inventory = await startAudienceUpstream(INVENTORY, ['inventory.read']);
const clock = new TestClock();
const h = await startTargetsHarness({
  clock,
  rotateRefreshTokens: true,
  resourceServers: {
    [ORDERS]: { audience: ORDERS_AUDIENCE, scopes: ['orders.read'] },
    [INVENTORY]: { scopes: ['inventory.read'] },
  },
  routes: ({ plain, orders, ledger }) => [
    { path: '/api/plain', upstream: plain.url },
    { path: '/api/orders', upstream: orders.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
    { path: '/api/inventory', upstream: inventory.url, token: { resource: INVENTORY, scopes: ['inventory.read'] } },
    { path: '/api/ledger', upstream: ledger.url, token: { exchange: { audience: LEDGER, scopes: ['ledger.read'] } } },
  ],
});
inventory.as = h.as;
t.teardown(async () => {
  await h.close();
  await inventory.close();
});

const PATHS = ['/api/plain', '/api/orders', '/api/inventory', '/api/ledger'];

async function allAtOnce(cookie: string, perPath: number): Promise<number[]> {
  const requests = PATHS.flatMap((path) => Array.from({ length: perPath }, (_, i) => fetch(`${h.url}${path}/${i}`, { headers: { cookie } })));
  return (await Promise.all(requests)).map((response) => response.status);
}

t.test('concurrent first requests for every target and the sign-in token: one grant each, no refresh token used twice', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const errors = h.as.grants.refreshTokenErrors;
  const before = { ...h.as.grants.byTarget };
  const statuses = await allAtOnce(cookie, 4);
  t.same(statuses, Array(statuses.length).fill(200), 'every request passed');
  t.equal(h.as.grants.refreshTokenErrors, errors, 'the AS refused no refresh grant (a reused rotated token would revoke the grant)');
  for (const target of [ORDERS, INVENTORY, LEDGER]) t.equal((h.as.grants.byTarget[target] ?? 0) - (before[target] ?? 0), 1, `one grant for ${target}`);
  const record = await storedTokens(h, 'alice');
  t.equal((await introspect(h.as, record!.refreshToken!, 'refresh_token')).active, true, 'the stored refresh token is the live one');
});

t.test('once every token is stale, concurrent requests renew each once, in turn, with the newest refresh token', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'bob' });
  t.same(await allAtOnce(cookie, 1), [200, 200, 200, 200]);
  const first = await storedTokens(h, 'bob');
  const refreshes = h.as.grants.refreshToken;
  const errors = h.as.grants.refreshTokenErrors;
  const before = { ...h.as.grants.byTarget };
  // Past every token's lifetime (60 s at the demo AS) as the gateway sees it; the AS still honours the refresh token.
  clock.advance(120_000);
  const statuses = await allAtOnce(cookie, 3);
  t.same(statuses, Array(statuses.length).fill(200), 'every request passed');
  t.equal(h.as.grants.refreshTokenErrors, errors, 'no refresh grant refused');
  // The sign-in refresh, and one grant per refresh-based target; the exchange presents no refresh token.
  t.equal(h.as.grants.refreshToken - refreshes, 3, 'one refresh for the sign-in tokens and one per resource target');
  for (const target of [ORDERS, INVENTORY, LEDGER]) t.equal((h.as.grants.byTarget[target] ?? 0) - (before[target] ?? 0), 1, `${target} renewed once`);
  const record = await storedTokens(h, 'bob');
  t.not(record!.accessToken, first!.accessToken, 'the sign-in token was refreshed');
  for (const id of Object.keys(first!.targets!)) t.not(record!.targets![id]!.accessToken, first!.targets![id]!.accessToken, 'each target token was renewed');
  t.not(record!.refreshToken, first!.refreshToken, 'rotated');
  t.equal((await introspect(h.as, record!.refreshToken!, 'refresh_token')).active, true, 'and the stored one is the live one');
  t.equal((await introspect(h.as, first!.refreshToken!, 'refresh_token')).active, false, 'the old one is spent');
});
