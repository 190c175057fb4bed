import t from 'tap';
import { randomBytes } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import WebSocket from 'ws';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startDecodingUpstream, type DecodingUpstream } from '../helpers/decoding-upstream.js';
import { startDpopUpstream } from '../helpers/dpop-upstream.js';

/**
 * README "WebSockets and server-sent events": the browser's handshake is
 * checked before anything goes upstream (GET, HTTP/1.1, a 16-byte
 * Sec-WebSocket-Key, Sec-WebSocket-Version 13, an origin-form target), so a
 * malformed upgrade never opens an upstream connection (counted here at the
 * upstream's TCP listener); the upstream URL is the route's origin, never
 * the request's target; the upstream's handshake carries X-Request-Id, and
 * with `provider.dpop` a DPoP proof (against the DPoP-checking upstream of
 * test/client-auth).
 */

/** Writes `head` on a raw socket and resolves with the status of the answer (0 when the gateway closed without one). */
function rawStatus(h: Harness, head: string): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(h.url);
  return new Promise((resolve, reject) => {
    const socket = netConnect(Number(port), hostname, () => socket.write(head));
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text }));
    socket.setTimeout(5000, () => socket.destroy());
  });
}

const key = () => randomBytes(16).toString('base64');

t.test('a malformed upgrade gets 400 and never opens an upstream connection', async (t) => {
  const upstream: DecodingUpstream = await startDecodingUpstream();
  const h = await startHarness({ config: { routes: [{ path: '/ws', upstream: upstream.url, websocket: true }] } });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const { host } = new URL(h.url);
  const upgrade = (requestLine: string, headers: Record<string, string | undefined>) => {
    const lines = Object.entries({ host, connection: 'Upgrade', upgrade: 'websocket', origin: h.url, cookie, ...headers })
      .filter(([, value]) => value !== undefined)
      .map(([name, value]) => `${name}: ${value}`);
    return `${requestLine}\r\n${lines.join('\r\n')}\r\n\r\n`;
  };
  const good = { 'sec-websocket-key': key(), 'sec-websocket-version': '13' };
  const malformed: Array<[string, string]> = [
    ['a POST', upgrade('POST /ws HTTP/1.1', { ...good, 'content-length': '0' })],
    ['a PUT', upgrade('PUT /ws HTTP/1.1', { ...good, 'content-length': '0' })],
    ['no Sec-WebSocket-Key', upgrade('GET /ws HTTP/1.1', { ...good, 'sec-websocket-key': undefined })],
    ['a key of 8 bytes', upgrade('GET /ws HTTP/1.1', { ...good, 'sec-websocket-key': randomBytes(8).toString('base64') })],
    ['a key that is not base64', upgrade('GET /ws HTTP/1.1', { ...good, 'sec-websocket-key': 'not a key at all, no!!' })],
    ['no Sec-WebSocket-Version', upgrade('GET /ws HTTP/1.1', { ...good, 'sec-websocket-version': undefined })],
    ['Sec-WebSocket-Version 8', upgrade('GET /ws HTTP/1.1', { ...good, 'sec-websocket-version': '8' })],
    ['HTTP/1.0', upgrade('GET /ws HTTP/1.0', good)],
    ['another protocol than websocket', upgrade('GET /ws HTTP/1.1', { ...good, upgrade: 'h2c' })],
    ['an absolute-form target with another scheme', upgrade('GET t://x/ws HTTP/1.1', good)],
    ['an absolute-form target naming another host', upgrade('GET http://evil.example/ws HTTP/1.1', good)],
    ['an encoded dot segment and slash', upgrade('GET /ws/%2e%2e%2fadmin HTTP/1.1', good)],
  ];
  // 30 attempts, as the review's: every one refused before any upstream socket.
  for (let attempt = 0; attempt < 30; attempt += 1) {
    const [what, head] = malformed[attempt % malformed.length]!;
    const answer = await rawStatus(h, head);
    t.equal(answer.status, 400, `${what}: 400`);
    if (attempt < malformed.length) {
      t.match(answer.text, /\r\ncache-control: no-store\r\n/i, `${what}: the gateway's error answer`);
      t.match(answer.text, /\r\nx-content-type-options: nosniff\r\n/i);
    }
  }
  t.equal(upstream.connections, 0, 'no upstream connection was opened');
  t.equal(upstream.read.length, 0);

  const ok = await rawStatus(h, upgrade('GET /ws HTTP/1.1', { 'sec-websocket-key': key(), 'sec-websocket-version': '13' }));
  t.equal(ok.status, 101, 'a well-formed handshake on the same socket recipe is accepted');
  t.equal(upstream.connections, 1, 'and is the only upstream connection');
});

t.test("the upstream's handshake carries X-Request-Id, the client's when it is sane", async (t) => {
  const upstream = await startDecodingUpstream();
  const h = await startHarness({ config: { routes: [{ path: '/ws', upstream: upstream.url, websocket: true }] } });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const open = (headers: Record<string, string>) =>
    new Promise<void>((resolve, reject) => {
      const socket = new WebSocket(`${h.url.replace('http', 'ws')}/ws`, { headers: { cookie, ...headers }, origin: h.url });
      socket.once('open', () => {
        socket.terminate();
        resolve();
      });
      socket.once('error', reject);
    });
  await open({ 'x-request-id': 'trace-42.a' });
  t.equal(upstream.read.at(-1)?.headers['x-request-id'], 'trace-42.a');
  await open({ 'x-request-id': 'not a sane id' });
  t.match(upstream.read.at(-1)?.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'else a new one');
});

t.test('with provider.dpop the upgrade carries Authorization: DPoP and a proof for that GET', async (t) => {
  const upstream = await startDpopUpstream();
  const h = await startHarness({
    dpopBound: true,
    config: (as) => {
      upstream.introspection = { endpoint: `${as.listenUrl}/token/introspection`, ...as.introspection };
      return { provider: { dpop: true }, routes: [{ path: '/ws', upstream: upstream.url, websocket: true }] };
    },
  });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const socket = await new Promise<WebSocket>((resolve, reject) => {
    const opened = new WebSocket(`${h.url.replace('http', 'ws')}/ws/room?x=1`, { headers: { cookie }, origin: h.url });
    opened.once('open', () => resolve(opened));
    opened.once('unexpected-response', (_request, response) => reject(new Error(`refused ${response.statusCode}: ${upstream.checks.at(-1)?.verdict}`)));
    opened.once('error', reject);
  });
  t.teardown(() => socket.terminate());
  const check = upstream.checks.at(-1)!;
  t.equal(check.upgrade, true);
  t.equal(check.verdict, 'ok', 'the upstream verified the proof, its htm, htu and ath, and the key the token is bound to');
  t.equal(check.sub, 'alice');
  t.match(check.authorization, /^DPoP /);
  t.equal(check.path, '/ws/room?x=1');
  const echoed = new Promise<string>((resolve) => socket.once('message', (data: Buffer) => resolve(data.toString('utf8'))));
  socket.send('hello');
  t.equal(await echoed, 'hello', 'and the socket works');
});
