import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { startHarness, type Harness, type HarnessOptions } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { revokeAtAuthorizationServer, shortLoginTokens, storedTokens, waitUntilExpired } from '../helpers/refresh.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { startReplicas } from '../redis/replicas.js';
import { redisMissing } from '../helpers/redis.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { signOutAtAuthorizationServer } from '../lifecycle/logout-token.js';
import { waitFor } from '../helpers/wait-for.js';

/** README "WebSockets and server-sent events": an open socket closes with 1008 within 5 s of its session ending (any kind, any replica); 1001 at shutdown; back-pressure. */

const WITHIN_MS = 5000;

async function webSocketGateway(t: Test, options: HarnessOptions = {}): Promise<{ h: Harness; upstream: WebSocketUpstream }> {
  const upstream = await startWebSocketUpstream();
  const h = await startHarness({ ...options, config: () => ({ ...((options.config as Record<string, unknown>) ?? {}), routes: [{ path: '/', upstream: upstream.url, websocket: true }] }) });
  upstream.as = h.as;
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  return { h, upstream };
}

function open(url: string, cookie: string, origin: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace('http', 'ws')}/socket`, { headers: { cookie }, origin });
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) => reject(new Error(`refused ${response.statusCode}`)));
  });
}

function closing(socket: WebSocket): Promise<{ code: number; reason: string; afterMs: number }> {
  const started = Date.now();
  return new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8'), afterMs: Date.now() - started })));
}

t.test('a refresh the AS rejects (on another request of the user) closes the socket with 1008', async (t) => {
  const { h } = await webSocketGateway(t, { accessTokenTtl: shortLoginTokens(2) });
  const { cookie } = await signIn(h.url, { user: 'rejected' });
  const socket = await open(h.url, cookie, h.url);
  const record = (await storedTokens(h, 'rejected'))!;
  await waitUntilExpired(h, record.accessToken);
  await revokeAtAuthorizationServer(h, record.refreshToken!);
  const closed = closing(socket);
  const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(response.status, 401, 'the request that tried the refresh');
  const { code, afterMs } = await closed;
  t.equal(code, 1008);
  t.ok(afterMs < WITHIN_MS, `closed after ${afterMs} ms`);
});

t.test('a back-channel logout from the AS closes the socket with 1008', async (t) => {
  const { h } = await webSocketGateway(t, { backchannelLogout: true });
  const deliveries: string[] = [];
  h.as.provider.on('backchannel.success', () => deliveries.push('ok'));
  h.as.provider.on('backchannel.error', (_ctx: unknown, err: Error) => deliveries.push(`error: ${err.message}`));
  const atAs = new CookieJar();
  const { cookie } = await signIn(h.url, { user: 'backchannel', authorizationServerJar: atAs });
  const socket = await open(h.url, cookie, h.url);
  const closed = closing(socket);
  // The user signs out at the AS itself, which POSTs its own signed logout token to the gateway.
  await signOutAtAuthorizationServer(h.as, atAs);
  t.strictSame(deliveries, ['ok'], 'the AS delivered one logout token and the gateway answered 200');
  const { code, reason, afterMs } = await closed;
  t.equal(code, 1008);
  t.equal(reason, 'session ended');
  t.ok(afterMs < WITHIN_MS, `closed after ${afterMs} ms`);
});

t.test("the session's ttl closes the socket with 1008", async (t) => {
  const { h } = await webSocketGateway(t, { config: { session: { ttl: '3s', cookieMaxAge: '3s' } } });
  const { cookie } = await signIn(h.url, { user: 'short-lived' });
  const socket = await open(h.url, cookie, h.url);
  const opened = Date.now();
  const { code, reason } = await closing(socket);
  t.equal(code, 1008);
  t.equal(reason, 'session ended');
  t.ok(Date.now() - opened < 3000 + WITHIN_MS, `closed ${Date.now() - opened} ms after opening with a 3 s ttl`);
});

t.test('shutdown closes open sockets with 1001 after the grace period', async (t) => {
  const { h } = await webSocketGateway(t);
  const { cookie } = await signIn(h.url, { user: 'stays' });
  const socket = await open(h.url, cookie, h.url);
  const closed = closing(socket);
  const stopped = h.gateway.shutdown();
  const { code, afterMs } = await closed;
  await stopped;
  t.equal(code, 1001);
  t.ok(afterMs >= 900, `closed ${afterMs} ms into the 1 s grace period, not at once`);
});

t.test('back-pressure: an upstream that reads nothing stops the gateway reading the browser', async (t) => {
  const { h, upstream } = await webSocketGateway(t);
  upstream.pauseReading = true;
  const { cookie } = await signIn(h.url, { user: 'flooder' });
  const socket = await open(h.url, cookie, h.url);
  t.teardown(() => socket.terminate());
  const message = Buffer.alloc(1024 * 1024, 1);
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < 64; i += 1) socket.send(message);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  // Had the gateway kept reading, the client's queue would have drained into the gateway's memory.
  t.ok(socket.bufferedAmount > 32 * 1024 * 1024, `${(socket.bufferedAmount / 1024 / 1024).toFixed(1)} MiB still queued at the browser`);
  t.ok(process.memoryUsage().rss - rssBefore < 200 * 1024 * 1024, 'memory stayed bounded');
});

t.test('back-pressure: a browser that reads nothing stops the gateway reading the upstream', async (t) => {
  const { h, upstream } = await webSocketGateway(t);
  const { cookie } = await signIn(h.url, { user: 'slow-reader' });
  const socket = await open(h.url, cookie, h.url);
  t.teardown(() => socket.terminate());
  socket.pause();
  const sender = upstream.sockets.at(-1)!;
  const message = Buffer.alloc(1024 * 1024, 2);
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < 64; i += 1) sender.send(message);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  // Had the gateway kept reading, the upstream's queue would have drained into the gateway's memory.
  t.ok(sender.bufferedAmount > 32 * 1024 * 1024, `${(sender.bufferedAmount / 1024 / 1024).toFixed(1)} MiB still queued at the upstream`);
  t.ok(process.memoryUsage().rss - rssBefore < 200 * 1024 * 1024, 'memory stayed bounded');
  let received = 0;
  socket.on('message', (data: Buffer) => (received += data.length));
  socket.resume();
  await waitFor('every message once the browser reads again', () => received === 64 * message.length);
  t.equal(received, 64 * message.length, 'nothing was lost while paused');
});

t.test('across replicas on Redis: a logout on one replica closes the socket held by another', { skip: redisMissing }, async (t) => {
  const upstream = await startWebSocketUpstream();
  t.teardown(() => upstream.close());
  const { h, urls } = await startReplicas(t, 2, { config: { routes: [{ path: '/', upstream: upstream.url, websocket: true }] } });
  upstream.as = h.as;
  const { cookie } = await signIn(urls[0]!, { user: 'two-replicas' });
  const socket = await open(urls[1]!, cookie, h.url);
  const closed = closing(socket);
  await (await fetch(`${urls[0]}/logout`, { method: 'POST', headers: { cookie, origin: h.url }, redirect: 'manual' })).arrayBuffer();
  const { code, afterMs } = await closed;
  t.equal(code, 1008);
  t.ok(afterMs < WITHIN_MS, `closed after ${afterMs} ms on the other replica`);
});
