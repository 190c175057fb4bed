import t from 'tap';
import WebSocket from 'ws';
import { signIn } from '../helpers/sign-in.js';
import { startTargetsHarness, LEDGER, ORDERS, ORDERS_AUDIENCE } from '../helpers/targets-harness.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { httpSend } from '../helpers/http-request.js';
import { introspect } from '../helpers/authorization-server-watch.js';
import { storedTokens } from '../helpers/refresh.js';

// README "A token for each API": forward-auth answers with, and a WebSocket upgrade sends, the matched route's target token.
const socketUpstream = await startWebSocketUpstream();
const h = await startTargetsHarness({
  tokenExchange: {
    [LEDGER]: { audience: LEDGER, scopes: ['ledger.read'] },
    denied: { audience: 'denied', scopes: ['d'], refuse: 'access_denied' },
  },
  config: { forwardAuth: { trustedProxies: ['127.0.0.1/32'] } },
  routes: ({ plain, orders }) => [
    { path: '/api/plain', upstream: plain.url },
    { path: '/api/orders', upstream: orders.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
    { path: '/api/denied', upstream: plain.url, token: { exchange: { audience: 'denied' } } },
    { path: '/ws', upstream: socketUpstream.url, websocket: true, token: { exchange: { audience: LEDGER, scopes: ['ledger.read'] } } },
  ],
});
socketUpstream.as = h.as;
t.teardown(async () => {
  await h.close();
  await socketUpstream.close();
});

function ask(uri: string, cookie: string) {
  return httpSend(h.url, {
    path: '/forward-auth',
    localAddress: '127.0.0.1',
    headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': uri, cookie, accept: 'application/json' },
  });
}

t.test('forward-auth answers with the matched route target token, and the sign-in token elsewhere', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const orders = await ask('/api/orders/7', cookie);
  t.equal(orders.status, 200);
  const ordersToken = /^Bearer (\S+)$/.exec(String(orders.headers.authorization))?.[1];
  const inspected = await introspect(h.as, ordersToken!, 'access_token');
  t.equal(inspected.active, true);
  t.equal(inspected.aud, ORDERS_AUDIENCE, 'the orders token');
  const plain = await ask('/api/plain/7', cookie);
  const record = await storedTokens(h, 'alice');
  t.equal(plain.headers.authorization, `Bearer ${record!.accessToken}`, 'the sign-in token for a plain route');
  const refused = await ask('/api/denied/1', cookie);
  t.equal(refused.status, 403);
  t.strictSame(JSON.parse(refused.body.toString()), { error: 'forbidden', reason: 'token_refused' });
  t.notOk('authorization' in refused.headers, 'a refusal carries no token');
});

t.test('a WebSocket upgrade sends the route target token to the upstream', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'bob' });
  const socket = new WebSocket(`${h.url.replace('http', 'ws')}/ws/feed`, { headers: { cookie }, origin: h.url });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  socket.close();
  const handshake = socketUpstream.handshakes.at(-1)!;
  t.equal(handshake.sub, 'bob', 'an active token of the user');
  const token = /^Bearer (\S+)$/.exec(String(handshake.headers.authorization))?.[1];
  t.equal((await introspect(h.as, token!, 'access_token')).aud, LEDGER, 'the exchanged ledger token');
  const record = await storedTokens(h, 'bob');
  t.not(token, record!.accessToken, 'not the sign-in token');
});
