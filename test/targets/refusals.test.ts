import t from 'tap';
import { signIn } from '../helpers/sign-in.js';
import { startTargetsHarness, ORDERS } from '../helpers/targets-harness.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { navigate } from '../helpers/navigate.js';
import { revokeAtAuthorizationServer, storedTokens } from '../helpers/refresh.js';

// README "A token for each API": a target the AS refuses is 403 token_refused with the session and the other
// targets kept and nothing sent upstream; invalid_grant ends the session; an AS that cannot answer is 503.
const never = await startScriptedUpstream();
const REFUSED_RESOURCE = 'https://refused.example.com';
const h = await startTargetsHarness({
  resourceServers: {
    [ORDERS]: { audience: 'orders-api', scopes: ['orders.read', 'orders.write'] },
    [REFUSED_RESOURCE]: { scopes: ['x'], refuseTokens: true },
  },
  tokenExchange: {
    ledger: { audience: 'ledger', scopes: ['ledger.read'] },
    denied: { audience: 'denied', scopes: ['d'], refuse: 'access_denied' },
    unauthorized: { audience: 'unauthorized', scopes: ['u'], refuse: 'unauthorized_client' },
  },
  extraScopes: ['notes.read'],
  routes: ({ plain, orders }) => [
    { path: '/api/plain', upstream: plain.url },
    { path: '/api/orders', upstream: orders.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
    { path: '/api/notes', upstream: plain.url, token: { scopes: ['notes.read'] } },
    // invalid_target: the AS takes the resource at sign-in but issues no token for it.
    { path: '/api/refused', upstream: never.url, token: { resource: REFUSED_RESOURCE } },
    // invalid_scope: a scope the AS never granted.
    { path: '/api/admin', upstream: never.url, token: { name: 'orders-admin', resource: ORDERS, scopes: ['orders.admin'] } },
    { path: '/api/denied', upstream: never.url, token: { exchange: { audience: 'denied' } } },
    { path: '/api/unauthorized', upstream: never.url, token: { exchange: { audience: 'unauthorized' } } },
    { path: '/api/opt', upstream: never.url, auth: 'optional', token: { exchange: { audience: 'denied' } } },
  ],
});
t.teardown(async () => {
  await h.close();
  await never.close();
});

t.test('each refusal of a target is 403 token_refused; the session and the other target token are kept, nothing goes upstream', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  t.equal((await fetch(`${h.url}/api/orders/1`, { headers: { cookie } })).status, 200);
  const ordersToken = h.orders.checks.at(-1)!.token;
  for (const path of ['/api/refused', '/api/admin', '/api/denied', '/api/unauthorized', '/api/opt']) {
    const api = await fetch(`${h.url}${path}/x`, { headers: { cookie, accept: 'application/json' } });
    t.equal(api.status, 403, path);
    t.strictSame(await api.json(), { error: 'forbidden', reason: 'token_refused' }, `${path}: the JSON body`);
    t.notOk(api.headers.getSetCookie().some((header) => header.startsWith('session_id=')), `${path}: the session cookie is not cleared`);
    const page = await navigate(`${h.url}${path}/x`, { cookie });
    t.equal(page.status, 403, `${path}: navigation`);
    const html = page.body;
    t.match(html, /signed in as alice/, `${path}: the 403 page names the user`);
    t.match(html, /href="\/logout"/, `${path}: and offers sign-out`);
  }
  t.equal(never.seen.length, 0, 'nothing reached an upstream');
  t.equal((await fetch(`${h.url}/api/orders/2`, { headers: { cookie } })).status, 200, 'the session still works');
  t.equal(h.orders.checks.at(-1)!.token, ordersToken, 'and the other target token was kept');
  const record = await storedTokens(h, 'alice');
  t.equal(Object.keys(record!.targets ?? {}).length, 1, 'no token kept for a refused target');
  const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
  t.match(metrics, /gatehouse_token_refreshes_total\{target="orders-admin",result="failed"\} [1-9]/);
});

t.test('an AS that cannot answer is 503 and the session is kept', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'bob' });
  h.asProxy.mode = 'down';
  try {
    const down = await fetch(`${h.url}/api/orders/1`, { headers: { cookie, accept: 'application/json' } });
    t.equal(down.status, 503);
    t.equal(((await down.json()) as { error: string }).error, 'provider_unavailable');
    h.asProxy.mode = 'error503';
    t.equal((await fetch(`${h.url}/api/orders/2`, { headers: { cookie } })).status, 503, 'a 5xx too');
    h.asProxy.mode = 'error429';
    t.equal((await fetch(`${h.url}/api/orders/3`, { headers: { cookie } })).status, 503, 'and a 429');
  } finally {
    h.asProxy.mode = 'up';
  }
  t.equal((await fetch(`${h.url}/api/orders/4`, { headers: { cookie } })).status, 200, 'the same cookie works once the AS answers');
});

t.test('invalid_grant on the refresh token ends the session', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'carol' });
  t.equal((await fetch(`${h.url}/api/plain/1`, { headers: { cookie } })).status, 200);
  const record = await storedTokens(h, 'carol');
  await revokeAtAuthorizationServer(h, record!.refreshToken!);
  const ended = await fetch(`${h.url}/api/notes/1`, { headers: { cookie, accept: 'application/json' } });
  t.equal(ended.status, 401);
  t.ok(ended.headers.getSetCookie().some((header) => header.startsWith('session_id=;')), 'the cookie is cleared');
  t.equal(await storedTokens(h, 'carol'), null, 'the token record is gone');
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401);
});
