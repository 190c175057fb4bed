import t from 'tap';
import { forgetSeen, startRoutesHarness } from '../helpers/routes-harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { findSetCookie } from '../helpers/set-cookie.js';

/**
 * README "Routes" with three real upstreams: longest prefix on segment boundaries,
 * stripPrefix with a base path, a token only to the matched route's
 * upstream, public and optional routes, identity headers (spoofed ones
 * removed on every mode, a claim holding CR/LF left out), 400 for dot
 * segments, 504 after a route's timeout, and the route's path on metrics
 * and access-log lines.
 */
t.test('routes end to end', async (t) => {
  const h = await startRoutesHarness(
    ({ web, api, docs }) => [
      {
        path: '/api/orders',
        upstream: `${api.url}/v1`,
        stripPrefix: true,
        headers: { 'X-User': 'sub', 'X-Email': 'email', 'X-Odd': 'odd', 'X-Groups': 'groups' },
      },
      { path: '/api', upstream: docs.url, headers: { 'X-User': 'sub' } },
      { path: '/slow', upstream: api.url, timeout: '1s' },
      { path: '/assets/', upstream: web.url, auth: 'public' },
      { path: '/', upstream: web.url, auth: 'optional', headers: { 'X-User': 'sub' } },
    ],
    { extraClaims: { alice: { odd: 'a\r\nX-Injected: 1', groups: ['staff'] } } },
  );
  t.teardown(() => h.close());
  const alice = await signIn(h.url, { user: 'alice' });
  const spoofed = { 'x-user': 'root', 'x-email': 'root@example.com', 'x-odd': 'spoof', authorization: 'Bearer from-the-browser' };

  t.test('longest prefix on segment boundaries, stripPrefix with the base path', async (t) => {
    forgetSeen(h);
    const cases: Array<[string, 'api' | 'docs' | 'web', string]> = [
      ['/api/orders/7?x=1', 'api', '/v1/7?x=1'],
      ['/api/orders', 'api', '/v1/'],
      ['/api/orders/', 'api', '/v1/'],
      ['/api/ordersx', 'docs', '/api/ordersx'],
      ['/api/other?q=2', 'docs', '/api/other?q=2'],
      ['/api', 'docs', '/api'],
      ['/apix', 'web', '/apix'],
      ['/assets/app.js', 'web', '/assets/app.js'],
      ['/assetsx', 'web', '/assetsx'],
    ];
    for (const [path, upstream, expected] of cases) {
      forgetSeen(h);
      const response = await fetch(`${h.url}${path}`, { headers: { cookie: alice.cookie } });
      t.equal(response.status, 200, path);
      await response.arrayBuffer();
      t.equal(h[upstream].seen.length, 1, `${path} reached ${upstream}`);
      t.equal(h[upstream].seen[0]?.url, expected, `${path} arrives as ${expected}`);
      t.equal(h.api.seen.length + h.docs.seen.length + h.web.seen.length, 1, `${path} reached no other upstream`);
    }
  });

  t.test('a token goes only to the upstream of the route that matched', async (t) => {
    forgetSeen(h);
    for (const path of ['/api/orders/1', '/api/orders//evil.example/x']) {
      const response = await fetch(`${h.url}${path}`, { headers: { cookie: alice.cookie } });
      await response.arrayBuffer();
    }
    // An encoded "/" is refused by the path rule (README "Routes"): nothing goes anywhere.
    t.equal((await fetch(`${h.url}/api/orders/%2F%2Fevil.example`, { headers: { cookie: alice.cookie } })).status, 400);
    t.equal(h.api.seen.length, 2);
    t.ok(h.api.seen.every((seen) => /^Bearer [\w-]+$/.test(String(seen.headers.authorization))), 'the orders upstream got the token');
    t.equal(h.docs.seen.length + h.web.seen.length, 0, 'no other upstream saw these requests');
    for (const path of ['/assets/app.js', '/assets/x']) await (await fetch(`${h.url}${path}`, { headers: { cookie: alice.cookie } })).arrayBuffer();
    t.ok(h.web.seen.every((seen) => seen.headers.authorization === undefined), 'the public route got no token');
  });

  t.test('required: the token and identity headers from the claims, spoofed ones replaced', async (t) => {
    forgetSeen(h);
    const response = await fetch(`${h.url}/api/orders/7`, { headers: { ...spoofed, cookie: `theme=dark; ${alice.cookie}` } });
    t.equal(response.status, 200);
    const seen = h.api.seen[0]!;
    t.equal(seen.headers['x-user'], 'alice');
    t.equal(seen.headers['x-email'], 'alice@example.com');
    t.not(seen.headers.authorization, spoofed.authorization);
    t.equal(seen.headers['x-odd'], undefined, 'a claim holding CR/LF leaves its header out');
    t.equal(seen.headers['x-injected'], undefined, 'and nothing of it reaches the upstream');
    t.equal(seen.headers['x-groups'], undefined, 'an array claim is not a header value');
    t.equal(seen.headers.cookie, 'theme=dark', "the gateway's cookies are stripped");
    // The docs route names only X-User: the headers other routes name are removed on it too.
    forgetSeen(h);
    await (await fetch(`${h.url}/api/x`, { headers: { ...spoofed, cookie: alice.cookie } })).arrayBuffer();
    t.equal(h.docs.seen[0]?.headers['x-user'], 'alice');
    t.equal(h.docs.seen[0]?.headers['x-email'], undefined);
    t.equal(h.docs.seen[0]?.headers['x-odd'], undefined);
  });

  t.test('public: no session read, no token, no gateway cookie, no identity', async (t) => {
    forgetSeen(h);
    const stale = `session_id=${'A'.repeat(43)}`;
    for (const cookie of [alice.cookie, stale]) {
      const response = await fetch(`${h.url}/assets/app.js`, { headers: { ...spoofed, cookie: `theme=dark; ${cookie}; session_id_signed_in=1` } });
      t.equal(response.status, 200);
      t.equal(findSetCookie(response, 'session_id'), undefined, 'the session is not even read (a stale one is not cleared)');
      await response.arrayBuffer();
    }
    for (const seen of h.web.seen) {
      t.equal(seen.headers.authorization, undefined, "the browser's Authorization never passes");
      t.equal(seen.headers.cookie, 'theme=dark', "no gateway cookie");
      t.equal(seen.headers['x-user'], undefined);
      t.equal(seen.headers['x-email'], undefined);
      t.equal(seen.headers['x-odd'], undefined);
    }
  });

  t.test('optional: signed in like required, anonymous without a redirect', async (t) => {
    forgetSeen(h);
    const signedIn = await fetch(`${h.url}/home`, { headers: { ...spoofed, cookie: alice.cookie } });
    t.equal(signedIn.status, 200);
    t.match(String(h.web.seen[0]?.headers.authorization), /^Bearer /);
    t.not(h.web.seen[0]?.headers.authorization, spoofed.authorization);
    t.equal(h.web.seen[0]?.headers['x-user'], 'alice');
    forgetSeen(h);
    const anonymous = await httpSend(h.url, { path: '/home?tab=1', headers: { ...spoofed, 'sec-fetch-mode': 'navigate', accept: 'text/html' } });
    t.equal(anonymous.status, 200, 'a navigation without a session is proxied, never redirected');
    t.equal(h.web.seen[0]?.url, '/home?tab=1');
    t.equal(h.web.seen[0]?.headers.authorization, undefined);
    t.equal(h.web.seen[0]?.headers['x-user'], undefined);
    t.equal(h.web.seen[0]?.headers['x-email'], undefined);
    forgetSeen(h);
    const stale = await fetch(`${h.url}/home`, { headers: { cookie: `session_id=${'A'.repeat(43)}` } });
    t.equal(stale.status, 200);
    t.equal(findSetCookie(stale, 'session_id')?.value, '', 'a stale session cookie is cleared');
  });

  t.test('the CSRF rule holds on an optional route only with a session', async (t) => {
    forgetSeen(h);
    const crossSite = { origin: 'https://evil.example', 'content-type': 'application/json' };
    t.equal((await fetch(`${h.url}/form`, { method: 'POST', headers: { ...crossSite, cookie: alice.cookie }, body: '{}' })).status, 403);
    t.equal(h.web.seen.length, 0, 'nothing upstream');
    t.equal((await fetch(`${h.url}/form`, { method: 'POST', headers: crossSite, body: '{}' })).status, 200, 'anonymous: nothing to forge');
  });

  t.test('a path with a dot segment or a backslash is refused, never matched', async (t) => {
    forgetSeen(h);
    for (const path of ['/assets/../api/orders/1', '/assets/%2e%2e/api/orders/1', '/assets/%2E./api', '/assets/./x', '/assets\\..\\api', '/assets/%5c..%5capi']) {
      const response = await httpSend(h.url, { path, headers: { cookie: alice.cookie } });
      t.equal(response.status, 400, path);
    }
    t.equal(h.api.seen.length + h.docs.seen.length + h.web.seen.length, 0, 'nothing reached any upstream');
  });

  t.test('no response head within the route timeout: 504', async (t) => {
    forgetSeen(h);
    h.api.answer = (_req, res) => {
      setTimeout(() => res.end('late'), 2000).unref();
    };
    t.teardown(() => {
      h.api.answer = (_req, res) => res.end('ok');
    });
    const started = Date.now();
    const response = await fetch(`${h.url}/slow/report`, { headers: { cookie: alice.cookie } });
    t.equal(response.status, 504);
    t.match(await response.json(), { error: 'gateway_timeout' });
    t.ok(Date.now() - started < 1900, 'answered at the route timeout, not when the upstream did');
    t.equal(h.api.seen[0]?.url, '/slow/report');
  });

  t.test("metrics and access-log lines carry the matched route's path", async (t) => {
    const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
    t.match(metrics, /gatehouse_http_requests_total\{route="\/api\/orders",status="200"\} [1-9]/);
    t.match(metrics, /gatehouse_http_requests_total\{route="\/assets",status="200"\} [1-9]/);
    t.match(metrics, /gatehouse_http_requests_total\{route="\/slow",status="504"\} 1/);
    const line = h.logs.find((entry) => entry.msg === 'request completed' && entry.path === '/api/orders/7');
    t.equal(line?.route, '/api/orders');
  });
});

t.test('every route label is present at 0 from start-up', async (t) => {
  const h = await startRoutesHarness(({ web, api }) => [
    { path: '/api', upstream: api.url },
    { path: '/', upstream: web.url, auth: 'public' },
  ]);
  t.teardown(() => h.close());
  const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
  for (const route of ['/api', '/', 'login', 'callback', 'logout', 'session']) {
    t.ok(metrics.includes(`gatehouse_http_requests_total{route="${route}",status="200"} 0`), route);
  }
  for (const result of ['ok', 'failed', 'joined']) t.ok(metrics.includes(`gatehouse_token_refreshes_total{target="sign-in",result="${result}"} 0`), result);
  t.ok(metrics.includes('gatehouse_logins_total{result="ok"} 0'));
});
