import t from 'tap';
import WebSocket from 'ws';
import { startHarness, type Harness } from '../helpers/harness.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { httpSend, type RawResponse } from '../helpers/http-request.js';

/**
 * README "Several sites": one gateway serves auth.localhost (publicUrl, the
 * sign-in host, top-level `routes`), app.localhost and grafana.localhost,
 * each with its own routes. The request's Host (X-Forwarded-Host only from a
 * trusted hop) picks the site; any other host gets 404 and nothing goes
 * upstream, WebSocket upgrades included. Requests go to 127.0.0.1 with the
 * Host header a browser would send.
 */

let h: Harness;
let home: ScriptedUpstream;
let app: ScriptedUpstream;
let grafana: ScriptedUpstream;
let port: string;

t.before(async () => {
  home = await startScriptedUpstream();
  app = await startScriptedUpstream();
  grafana = await startScriptedUpstream();
  h = await startHarness({
    publicHost: 'auth.localhost',
    config: {
      server: { trustProxy: ['127.0.0.2'] },
      routes: [{ path: '/', upstream: home.url, auth: 'public' }],
      forwardAuth: { trustedProxies: ['127.0.0.1/32'], redirect: true },
      sites: [
        {
          host: 'app.localhost',
          routes: [
            { path: '/', upstream: app.url, auth: 'public' },
            { path: '/private', upstream: app.url },
            { path: '/ws', upstream: app.url, auth: 'public', websocket: true },
          ],
        },
        { host: 'Grafana.localhost', routes: [{ path: '/', upstream: grafana.url, auth: 'public' }] },
      ],
    },
  });
  port = new URL(h.url).port;
});

t.teardown(async () => {
  await h.close();
  await Promise.all([home.close(), app.close(), grafana.close()]);
});

function forget(): void {
  for (const upstream of [home, app, grafana]) upstream.seen.length = 0;
}

/** A request to the gateway on 127.0.0.1 with this Host header. */
function get(host: string, path = '/', headers: Record<string, string> = {}, localAddress?: string): Promise<RawResponse> {
  return httpSend(`http://127.0.0.1:${port}`, { path, headers: { host, ...headers }, ...(localAddress === undefined ? {} : { localAddress }) });
}

t.test('each host reaches its own route table, in any case, with or without its port or a trailing dot', async (t) => {
  forget();
  t.equal((await get(`auth.localhost:${port}`, '/x')).status, 200);
  t.equal(home.seen.length, 1, 'publicUrl\'s host: the top-level routes');
  t.equal((await get(`app.localhost:${port}`, '/x')).status, 200);
  t.equal((await get('APP.localhost.', '/y')).status, 200);
  t.same(
    app.seen.map((seen) => seen.url),
    ['/x', '/y'],
  );
  t.equal(app.seen[0]!.headers['x-forwarded-host'], `app.localhost:${port}`, 'the upstream is told the site\'s host');
  t.equal((await get(`grafana.localhost:${port}`, '/g')).status, 200);
  t.equal(grafana.seen.length, 1, 'a host configured in upper case matches in lower case');
  t.equal(home.seen.length, 1);
});

t.test('a host that is neither publicUrl\'s nor a site\'s gets 404 and nothing goes upstream', async (t) => {
  forget();
  for (const host of [`evil.localhost:${port}`, '127.0.0.1', `app.localhost.evil:${port}`, 'app.localhost:notaport', '[::1]', '', 'x'.repeat(2000)]) {
    for (const accept of ['text/html', 'application/json']) {
      const answer = await get(host, '/private', { accept });
      t.equal(answer.status, 404, `${host.slice(0, 40)} (${accept})`);
      t.equal(answer.headers['cache-control'], 'no-store');
      if (accept === 'application/json') t.same(JSON.parse(answer.body.toString()), { error: 'not_found', message: 'Nothing is served at this host.' });
    }
  }
  const gatewayPath = await get('evil.localhost', '/login');
  t.equal(gatewayPath.status, 404, 'the gateway\'s own paths too');
  t.same([home.seen.length, app.seen.length, grafana.seen.length], [0, 0, 0]);
  const line = h.logs.find((entry) => entry.code === 'GH_ERR_SITE_UNKNOWN');
  t.ok(line, 'the access log names the refusal');
});

t.test('a huge Host header gets a clean 4xx', async (t) => {
  const answer = await get('a'.repeat(20_000));
  t.ok(answer.status >= 400 && answer.status < 500, `status ${answer.status}`);
});

t.test('X-Forwarded-Host picks the site only from a trusted hop', async (t) => {
  forget();
  // 127.0.0.1 is not in server.trustProxy: its X-Forwarded-Host is a client's claim, and the Host header decides.
  t.equal((await get(`auth.localhost:${port}`, '/a', { 'x-forwarded-host': 'app.localhost' })).status, 200);
  t.equal(home.seen.length, 1);
  t.equal(app.seen.length, 0);
  t.equal((await get(`evil.localhost`, '/a', { 'x-forwarded-host': 'app.localhost' })).status, 404);
  // 127.0.0.2 is trusted: its X-Forwarded-Host names the site.
  t.equal((await get('gatehouse.internal', '/b', { 'x-forwarded-host': 'app.localhost' }, '127.0.0.2')).status, 200);
  t.equal(app.seen.length, 1);
  t.equal((await get(`app.localhost`, '/b', { 'x-forwarded-host': 'evil.localhost' }, '127.0.0.2')).status, 404);
  t.equal(app.seen.length, 1);
});

t.test('a navigation on a site without a session goes to the sign-in host with the full site URL', async (t) => {
  forget();
  const answer = await get(`app.localhost:${port}`, '/private/page?x=1', { accept: 'text/html' });
  t.equal(answer.status, 302);
  const location = new URL(answer.headers.location!);
  t.equal(location.origin, h.url, 'to publicUrl');
  t.equal(location.pathname, '/login');
  t.equal(location.searchParams.get('returnTo'), `http://app.localhost:${port}/private/page?x=1`);
  t.equal(app.seen.length, 0);
  const api = await get(`app.localhost:${port}`, '/private/page', { accept: 'application/json' });
  t.equal(api.status, 401);
});

t.test('a WebSocket upgrade names its site by Host; an unknown host gets 404 and nothing goes upstream', async (t) => {
  forget();
  const status = await new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: `evil.localhost:${port}`, origin: `http://app.localhost:${port}` } });
    socket.on('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.on('open', () => reject(new Error('opened')));
    socket.on('error', () => undefined);
  });
  t.equal(status, 404);
  t.same([home.seen.length, app.seen.length, grafana.seen.length], [0, 0, 0]);
  // The same upgrade on the site with another site's Origin: the site's own origin alone may open its sockets.
  const foreign = await new Promise<number>((resolve) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: `app.localhost:${port}`, origin: h.url } });
    socket.on('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.on('error', () => undefined);
  });
  t.equal(foreign, 403);
  t.equal(app.seen.length, 0);
});

t.test('unsafe requests: each site accepts its own origin only', async (t) => {
  forget();
  const own = await httpSend(`http://127.0.0.1:${port}`, { method: 'POST', path: '/private/x', headers: { host: `app.localhost:${port}`, origin: `http://app.localhost:${port}`, accept: 'application/json' } });
  t.equal(own.status, 401, 'its own origin passes the CSRF rule (and then needs a session)');
  const other = await httpSend(`http://127.0.0.1:${port}`, { method: 'POST', path: '/private/x', headers: { host: `app.localhost:${port}`, origin: h.url, accept: 'application/json' } });
  t.equal(other.status, 403, 'the sign-in host\'s origin is another site\'s');
  t.equal(app.seen.length, 0);
});

t.test('forward-auth applies the routes of the site X-Forwarded-Host or X-Original-URL names', async (t) => {
  const ask = (headers: Record<string, string>) => httpSend(`http://127.0.0.1:${port}`, { path: '/forward-auth', headers: { host: 'gatehouse.internal', accept: 'text/html', ...headers } });
  t.equal((await ask({ 'x-forwarded-host': `app.localhost:${port}`, 'x-forwarded-uri': '/open', 'x-forwarded-method': 'GET' })).status, 200, 'a public route of app');
  const refused = await ask({ 'x-forwarded-host': `app.localhost:${port}`, 'x-forwarded-uri': '/private/p', 'x-forwarded-method': 'GET' });
  t.equal(refused.status, 302, 'app\'s required route: to sign-in');
  t.equal(new URL(refused.headers.location!).searchParams.get('returnTo'), `http://app.localhost:${port}/private/p`);
  t.equal((await ask({ 'x-original-url': `http://app.localhost:${port}/private/p` })).status, 302, 'the host of X-Original-URL');
  t.equal((await ask({ 'x-original-url': `http://grafana.localhost:${port}/private/p` })).status, 200, 'grafana has no required route');
  t.equal((await ask({ 'x-forwarded-host': 'evil.localhost', 'x-forwarded-uri': '/' })).status, 404);
  t.equal((await ask({ 'x-forwarded-host': 'grafana.localhost', 'x-original-url': `http://app.localhost:${port}/private/p` })).status, 400, 'two hosts that disagree');
});

t.test('request metrics carry the site; a host no site has counts under site=""', async (t) => {
  await get(`app.localhost:${port}`, '/m');
  await get(`grafana.localhost:${port}`, '/m');
  await get('evil.localhost', '/m');
  const text = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
  t.match(text, /gatehouse_http_requests_total\{route="\/",status="200",site="app\.localhost"\} [1-9]/);
  t.match(text, /gatehouse_http_requests_total\{route="\/",status="200",site="grafana\.localhost"\} [1-9]/);
  t.match(text, new RegExp(`gatehouse_http_requests_total\\{route="\\/",status="200",site="auth\\.localhost:${port}"\\} [1-9]`));
  t.match(text, /gatehouse_http_requests_total\{route="proxy",status="404",site=""\} [1-9]/);
  t.match(text, /gatehouse_http_requests_total\{route="login",status="200",site="grafana\.localhost"\} 0/, 'every site\'s series from start-up');
});
