import t from 'tap';
import { signIn, startLogin } from '../helpers/sign-in.js';
import { startTargetsHarness, LEDGER, ORDERS, ORDERS_AUDIENCE } from '../helpers/targets-harness.js';
import { storedTokens } from '../helpers/refresh.js';

// README "A token for each API": each route's upstream receives a token for its own audience, and only it.
const h = await startTargetsHarness();
t.teardown(() => h.close());

t.test('sign-in asks for every target resource and the union of the scopes in one authorization request', async (t) => {
  const { authorizationUrl } = await startLogin(h.url);
  t.same(authorizationUrl.searchParams.getAll('resource'), [ORDERS], 'one resource parameter per resource');
  const scopes = authorizationUrl.searchParams.get('scope')!.split(' ');
  for (const scope of ['openid', 'profile', 'email', 'offline_access', 'orders.read', 'ledger.read']) t.ok(scopes.includes(scope), scope);
});

t.test('each upstream receives a token of its own audience; the sign-in token goes only to the plain route', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  for (const [path, upstream] of [
    ['/api/plain', h.plain],
    ['/api/orders', h.orders],
    ['/api/ledger', h.ledger],
  ] as const) {
    const response = await fetch(`${h.url}${path}/x`, { headers: { cookie, accept: 'application/json' } });
    t.equal(response.status, 200, `${path}: ${await response.text()}`);
    t.equal(upstream.checks.at(-1)?.verdict, 'ok', path);
    t.equal(upstream.checks.at(-1)?.sub, 'alice', path);
  }
  t.equal(h.orders.checks.at(-1)?.aud, ORDERS_AUDIENCE);
  t.equal(h.ledger.checks.at(-1)?.aud, LEDGER);
  const signInToken = h.plain.checks.at(-1)!.token;
  const tokens = new Set([signInToken, h.orders.checks.at(-1)!.token, h.ledger.checks.at(-1)!.token]);
  t.equal(tokens.size, 3, 'three different tokens');

  // The APIs really check: the sign-in token sent straight to them is refused.
  for (const upstream of [h.orders, h.ledger]) {
    const direct = await fetch(`${upstream.url}/direct`, { headers: { authorization: `Bearer ${signInToken}` } });
    t.equal(direct.status, 403, 'an upstream refuses a token of another audience');
  }
  const record = await storedTokens(h, 'alice');
  t.equal(Object.keys(record?.targets ?? {}).length, 2, 'both target tokens kept in the sealed record');
});

t.test('a fresh target token is reused: no grant per request', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'bob' });
  const before = { ...h.as.grants.byTarget };
  const seen = new Set<string>();
  for (let i = 0; i < 3; i += 1) {
    const response = await fetch(`${h.url}/api/orders/${i}`, { headers: { cookie } });
    t.equal(response.status, 200);
    seen.add(h.orders.checks.at(-1)!.token);
  }
  t.equal(seen.size, 1, 'one token for three requests');
  t.equal((h.as.grants.byTarget[ORDERS] ?? 0) - (before[ORDERS] ?? 0), 1, 'one grant');
});

t.test('concurrent first requests of one user for one target cause one grant', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'carol' });
  const before = { ...h.as.grants.byTarget };
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => fetch(`${h.url}/api/ledger/${i}`, { headers: { cookie } })));
  t.same(answers.map((answer) => answer.status), Array(8).fill(200));
  t.equal((h.as.grants.byTarget[LEDGER] ?? 0) - (before[LEDGER] ?? 0), 1, 'one token exchange');
});

t.test('metrics count target grants under the target label; /session shows no token', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'dave' });
  await (await fetch(`${h.url}/api/orders/m`, { headers: { cookie } })).text();
  const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
  t.match(metrics, new RegExp(`gatehouse_token_refreshes_total\\{target="${ORDERS.replaceAll('.', '\\.')}",result="ok"\\} [1-9]`));
  t.match(metrics, /gatehouse_token_refreshes_total\{target="ledger",result="failed"\} 0/);
  t.match(metrics, /gatehouse_token_refreshes_total\{target="sign-in",result="ok"\} \d+/);
  const session = await (await fetch(`${h.url}/session`, { headers: { cookie } })).text();
  const record = await storedTokens(h, 'dave');
  for (const token of [record!.accessToken, ...Object.values(record!.targets ?? {}).map((target) => target.accessToken)]) {
    t.notOk(session.includes(token), '/session carries no token');
  }
});
