import t from 'tap';
import WebSocket from 'ws';
import { pseudonymOf, startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { waitFor } from '../helpers/wait-for.js';

/** README "WebSockets and server-sent events": WebSocket upgrades on `websocket: true` routes, through a real AS and a real ws upstream. */

let h: Harness;
let upstream: WebSocketUpstream;

t.before(async () => {
  upstream = await startWebSocketUpstream();
  h = await startHarness({
    config: () => ({
      routes: [
        { path: '/ws', upstream: upstream.url, websocket: true, headers: { 'X-Forwarded-User': 'sub' } },
        { path: '/live', upstream: upstream.url, websocket: true, auth: 'optional' },
        { path: '/open', upstream: upstream.url, websocket: true, auth: 'public' },
        { path: '/admins', upstream: upstream.url, websocket: true, allow: { claims: { groups: ['admins'] } } },
        { path: '/api', upstream: upstream.url },
      ],
    }),
  });
  upstream.as = h.as;
});
t.teardown(async () => {
  await h.close();
  await upstream.close();
});

const wsUrl = (path: string) => `${h.url.replace('http', 'ws')}${path}`;

/** Opens a socket through the gateway as a browser would; resolves with it open, or rejects with the refusal's status. */
function connect(path: string, options: { cookie?: string; origin?: string | null; protocols?: string[] } = {}): Promise<WebSocket> {
  const headers: Record<string, string> = {};
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  const origin = options.origin === undefined ? h.url : options.origin;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl(path), options.protocols ?? [], { headers, ...(origin === null ? {} : { origin }) });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      response.on('end', () => reject(Object.assign(new Error(`refused ${response.statusCode}`), { status: response.statusCode, body })));
    });
    socket.once('error', reject);
  });
}

function nextMessage(socket: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  return new Promise((resolve) => socket.once('message', (data: Buffer, isBinary: boolean) => resolve({ data, isBinary })));
}

function closed(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
}

t.test('a required route: no session gets 401 (never a redirect) and the upstream sees nothing', async (t) => {
  const before = upstream.handshakes.length;
  await t.rejects(connect('/ws'), { message: 'refused 401' });
  await t.rejects(connect('/ws', { cookie: 'session_id=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }), { message: 'refused 401' });
  t.equal(upstream.handshakes.length, before);
});

t.test('a foreign or missing Origin gets 403 and never reaches the upstream (cross-site WebSocket hijacking)', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'origin-user' });
  const before = upstream.handshakes.length;
  await t.rejects(connect('/ws', { cookie, origin: 'https://evil.example' }), { message: 'refused 403' });
  await t.rejects(connect('/ws', { cookie, origin: null }), { message: 'refused 403' });
  await t.rejects(connect('/open', { origin: 'https://evil.example' }), { message: 'refused 403' }, 'public routes too');
  t.equal(upstream.handshakes.length, before);
});

t.test("the upstream's handshake: a bearer of the user, identity headers, every subprotocol, no gateway cookie", async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const socket = await connect('/ws/room?x=1', {
    cookie: `${cookie}; theme=dark`,
    protocols: ['chat.v2', 'chat.v1'],
  });
  t.teardown(() => socket.terminate());
  const handshake = upstream.handshakes.at(-1)!;
  t.equal(handshake.sub, 'alice', 'the bearer introspects as the signed-in user at the AS');
  t.equal(handshake.path, '/ws/room?x=1');
  t.equal(handshake.headers['x-forwarded-user'], 'alice');
  t.strictSame(handshake.headers['sec-websocket-protocol']?.split(/, */), ['chat.v2', 'chat.v1'], 'every subprotocol, in order');
  t.equal(handshake.headers.cookie, 'theme=dark', "the gateway's cookies are stripped, the app's kept");
  t.equal(socket.protocol, 'chat.v2', 'the browser gets the subprotocol the upstream chose');
});

t.test('spoofed identity and Authorization headers on the upgrade never reach the upstream', async (t) => {
  const socket = new WebSocket(wsUrl('/open'), { origin: h.url, headers: { 'x-forwarded-user': 'admin', authorization: 'Bearer forged' } });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  t.teardown(() => socket.terminate());
  const handshake = upstream.handshakes.at(-1)!;
  t.equal(handshake.headers['x-forwarded-user'], undefined);
  t.equal(handshake.headers.authorization, undefined, 'a public route gets no token, and never the browser’s');
});

t.test("a signed-in user whom the route's allow refuses gets 403 before the upgrade", async (t) => {
  const { cookie } = await signIn(h.url, { user: 'not-an-admin' });
  const before = upstream.handshakes.length;
  await t.rejects(connect('/admins', { cookie }), { message: 'refused 403' });
  t.equal(upstream.handshakes.length, before, 'the upstream saw nothing');
});

t.test('messages pass unchanged both ways, text as text and binary as binary', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'echo-user' });
  const socket = await connect('/ws', { cookie });
  t.teardown(() => socket.terminate());
  socket.send('hello ✓');
  const text = await nextMessage(socket);
  t.equal(text.data.toString('utf8'), 'hello ✓');
  t.equal(text.isBinary, false);
  const bytes = Buffer.from([0, 1, 2, 255, 254]);
  socket.send(bytes);
  const binary = await nextMessage(socket);
  t.ok(binary.isBinary);
  t.ok(binary.data.equals(bytes));
  const large = Buffer.alloc(5 * 1024 * 1024, 7);
  socket.send(large);
  const echoed = await nextMessage(socket);
  t.ok(echoed.isBinary && echoed.data.equals(large), 'a 5 MiB binary message, under the default limits.websocketMessageBytes');
});

t.test("the upstream's refusal reaches the browser with its status", async (t) => {
  const { cookie } = await signIn(h.url, { user: 'refused-user' });
  upstream.refuseWith = 403;
  t.teardown(() => (upstream.refuseWith = undefined));
  await t.rejects(connect('/ws', { cookie }), { message: 'refused 403' });
});

t.test('optional and public routes open without a session, with no token', async (t) => {
  const socket = await connect('/live');
  t.equal(upstream.handshakes.at(-1)!.headers.authorization, undefined);
  socket.terminate();
  const { cookie } = await signIn(h.url, { user: 'optional-user' });
  const signedIn = await connect('/live', { cookie });
  t.equal(upstream.handshakes.at(-1)!.sub, 'optional-user', 'with a session, the bearer');
  signedIn.terminate();
});

t.test('routes without websocket: true, unmatched paths and dot segments refuse upgrades', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'refuse-user' });
  const before = upstream.handshakes.length;
  await t.rejects(connect('/api', { cookie }), { message: 'refused 400' }, 'a route without websocket: true');
  await t.rejects(connect('/elsewhere', { cookie }), { message: 'refused 404' }, 'a path no route matches');
  await t.rejects(connect('/ws/../api', { cookie }), { message: 'refused 400' }, 'a dot segment');
  t.equal(upstream.handshakes.length, before, 'none reached the upstream');
});

t.test('logout closes the socket with 1008 within seconds; the gauge counts open sockets; one access-log line', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'logout-user' });
  const openSockets = async () => {
    const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
    return Number(/^gatehouse_websocket_connections (\d+)$/m.exec(metrics)?.[1]);
  };
  // The earlier tests' sockets were cut at their ends; the gateway may still be counting them out.
  await waitFor('no socket open', async () => (await openSockets()) === 0);
  const socket = await connect('/ws', { cookie });
  t.equal(await openSockets(), 1, 'the gauge counts the open socket');
  socket.send('x');
  await nextMessage(socket);
  const ended = closed(socket);
  const started = Date.now();
  await (await fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie, origin: h.url }, redirect: 'manual' })).arrayBuffer();
  const { code, reason } = await ended;
  t.equal(code, 1008);
  t.equal(reason, 'session ended');
  t.ok(Date.now() - started < 5000, `closed ${Date.now() - started} ms after the logout`);
  await waitFor('the access-log line', () => h.logs.some((line) => line.msg === 'websocket closed' && line.closeCode === 1008));
  const line = h.logs.find((entry) => entry.msg === 'websocket closed' && entry.closeCode === 1008)!;
  t.match(line, { route: '/ws', bytesIn: 1, bytesOut: 1, durationMs: Number });
  t.equal(line.userId, pseudonymOf(h, 'logout-user'), "the user is logged as their pseudonym, as on every access-log line");
  t.equal(await openSockets(), 0, 'the gauge is back down once the socket closed');
});

t.test("logout everywhere closes the sockets of every session of the user with 1008", async (t) => {
  const first = await signIn(h.url, { user: 'everywhere-user' });
  const second = await signIn(h.url, { user: 'everywhere-user' });
  const sockets = [await connect('/ws', { cookie: first.cookie }), await connect('/ws', { cookie: second.cookie })];
  const ended = sockets.map(closed);
  await (await fetch(`${h.url}/logout?everywhere=1`, { method: 'POST', headers: { cookie: first.cookie, origin: h.url }, redirect: 'manual' })).arrayBuffer();
  for (const { code } of await Promise.all(ended)) t.equal(code, 1008);
});
