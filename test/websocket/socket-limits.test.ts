import t from 'tap';
import WebSocket from 'ws';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * README "WebSockets and server-sent events": at most limits.perUserConcurrency
 * sockets of one user, and as many of one client address without a session,
 * are open at once (429 at the upgrade, nothing sent upstream); each side is
 * pinged every third of server.idleTimeout, and a peer that answers none for
 * server.idleTimeout has its socket closed on both sides.
 */

const LIMIT = 4;
let h: Harness;
let upstream: WebSocketUpstream;

t.before(async () => {
  upstream = await startWebSocketUpstream();
  h = await startHarness({
    config: () => ({
      server: { idleTimeout: '3s' },
      limits: { perUserConcurrency: LIMIT },
      routes: [
        { path: '/ws', upstream: upstream.url, websocket: true },
        { path: '/open', upstream: upstream.url, websocket: true, auth: 'public' },
        { path: '/live', upstream: upstream.url, websocket: true, auth: 'optional' },
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

/** Resolves with the open socket, or with the refusal's status. */
function attempt(path: string, cookie?: string, options: { autoPong?: boolean } = {}): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl(path), { origin: h.url, headers: cookie === undefined ? {} : { cookie }, autoPong: options.autoPong ?? true });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_request, response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    socket.once('error', reject);
  });
}

function closed(socket: WebSocket): Promise<number> {
  if (socket.readyState === WebSocket.CLOSED) return Promise.resolve(-1);
  return new Promise((resolve) => socket.once('close', (code) => resolve(code)));
}

async function closeAll(sockets: WebSocket[]): Promise<void> {
  await Promise.all(sockets.map((socket) => (socket.close(), closed(socket))));
  await waitFor('the upstream sides closed', () => upstream.sockets.every((side) => side.readyState === WebSocket.CLOSED));
}

for (const [name, path, user] of [
  ['one user', '/ws', 'many-sockets'],
  ['one client address without a session (public route)', '/open', undefined],
  ['one client address without a session (optional route)', '/live', undefined],
] as const) {
  t.test(`100 upgrades of ${name}: ${LIMIT} open, the others 429, nothing of them upstream`, async (t) => {
    const cookie = user === undefined ? undefined : (await signIn(h.url, { user })).cookie;
    const before = upstream.handshakes.length;
    const results = await Promise.all(Array.from({ length: 100 }, () => attempt(path, cookie)));
    const open = results.filter((result): result is WebSocket => result instanceof WebSocket);
    const statuses = results.filter((result): result is number => typeof result === 'number');
    t.equal(open.length, LIMIT, `${LIMIT} sockets open`);
    t.strictSame([...new Set(statuses)], [429], 'every other upgrade got 429');
    t.equal(upstream.handshakes.length - before, LIMIT, 'only the admitted upgrades reached the upstream');

    const [first] = open;
    first!.close();
    await closed(first!);
    let again: WebSocket | undefined;
    await waitFor('a slot free again', async () => {
      const next = await attempt(path, cookie);
      if (next instanceof WebSocket) again = next;
      return again !== undefined;
    }, 5000);
    t.ok(again, 'a closed socket gives its slot back');
    await closeAll([...open.slice(1), again!]);
  });
}

t.test('a refused or failed upgrade gives its slot back', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'refused-user' });
  upstream.refuseWith = 403;
  for (let i = 0; i < LIMIT * 2; i += 1) t.equal(await attempt('/ws', cookie), 403, 'the upstream refuses');
  upstream.refuseWith = undefined;
  const open = await Promise.all(Array.from({ length: LIMIT }, () => attempt('/ws', cookie)));
  t.ok(open.every((socket) => socket instanceof WebSocket), `${LIMIT} open afterwards all the same`);
  await closeAll(open as WebSocket[]);
});

t.test('a peer that answers no ping for server.idleTimeout is closed on both sides; one that answers stays', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'silent-user' });
  const before = upstream.sockets.length;
  const silent = (await attempt('/ws', cookie, { autoPong: false })) as WebSocket;
  const lively = (await attempt('/ws', cookie)) as WebSocket;
  t.ok(silent instanceof WebSocket && lively instanceof WebSocket);
  let pings = 0;
  silent.on('ping', () => (pings += 1));
  const [silentUpstream, livelyUpstream] = upstream.sockets.slice(before);
  const started = Date.now();
  await closed(silent);
  const after = Date.now() - started;
  t.ok(pings >= 2, `pinged every third of idleTimeout (${pings} pings)`);
  t.ok(after >= 2500 && after < 6000, `cut ${after} ms after opening (idleTimeout 3 s)`);
  await waitFor('its upstream side closed too', () => silentUpstream!.readyState === WebSocket.CLOSED);
  t.equal(lively.readyState, WebSocket.OPEN, 'the socket whose peer answers stays open');
  t.equal(livelyUpstream!.readyState, WebSocket.OPEN);
  lively.send('still here');
  t.equal((await new Promise<Buffer>((resolve) => lively.once('message', resolve))).toString(), 'still here');
  await closeAll([lively]);
});
