import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { problemsOf, withKeys } from '../config/config-helpers.js';

/**
 * forwardAuth.only (the Helm chart's forward-auth mode): the ingress sends
 * requests upstream, so the gateway proxies nothing: a signed-in request to
 * any other path gets 404 and no upstream ever sees a token from it.
 */
t.test('forward-auth only: nothing is proxied, the endpoint still answers', async (t) => {
  const h = await startHarness({ config: { forwardAuth: { trustedProxies: ['127.0.0.1/32'], only: true } } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const received = h.upstream.received.length;

  const proxied = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(proxied.status, 404);
  t.match(await proxied.json(), { error: 'not_found' });
  t.equal(h.upstream.received.length, received, 'the upstream saw nothing');
  const upgrade = await httpSend(h.url, {
    path: '/socket',
    headers: { cookie, origin: h.url, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
  });
  t.equal(upgrade.status, 404, 'no WebSocket is proxied either');

  const login = await fetch(`${h.url}/login`, { method: 'PUT' });
  t.equal(login.status, 405, "a gateway path with another method is still 405, not 404");

  const asked = await httpSend(h.url, {
    path: '/forward-auth',
    headers: { cookie, 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/api/me' },
  });
  t.equal(asked.status, 200);
  t.match(asked.headers.authorization, /^Bearer /, 'the endpoint hands the proxy the bearer, as without only');
});

t.test('forwardAuth.only needs trusted proxies', async (t) => {
  t.strictSame(problemsOf(withKeys({ forwardAuth: { only: true } })), ['forwardAuth.only: needs forwardAuth.trustedProxies (the proxies that may ask the endpoint)']);
});
