import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';

/**
 * README "WebSockets and server-sent events": a message larger than
 * `limits.websocketMessageBytes`, from either side, closes the socket with
 * 1009 instead of being held whole in the gateway's memory; the gateway goes on.
 */

const LIMIT = 64 * 1024;

let h: Harness;
let upstream: WebSocketUpstream;
let cookie: string;

t.before(async () => {
  upstream = await startWebSocketUpstream();
  h = await startHarness({
    config: () => ({ limits: { websocketMessageBytes: LIMIT }, routes: [{ path: '/', upstream: upstream.url, websocket: true }] }),
  });
  upstream.as = h.as;
  ({ cookie } = await signIn(h.url, { user: 'big-sender' }));
});
t.teardown(async () => {
  await h.close();
  await upstream.close();
});

function connect(): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${h.url.replace('http', 'ws')}/socket`, { headers: { cookie }, origin: h.url });
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
  });
}

function closed(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
}

function echoOf(socket: WebSocket, message: Buffer): Promise<Buffer> {
  return new Promise((resolve) => {
    socket.once('message', (data: Buffer) => resolve(data));
    socket.send(message);
  });
}

/** The gateway still opens sockets and relays messages after one was closed for a huge message. */
async function stillRelays(t: Test): Promise<void> {
  const socket = await connect();
  const message = Buffer.alloc(LIMIT, 3);
  t.ok((await echoOf(socket, message)).equals(message), 'a new socket echoes a message of exactly the limit');
  socket.close();
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200, 'and answers HTTP');
}

t.test('a browser message one byte over the limit closes the socket with 1009 on both sides; the upstream never gets it', async (t) => {
  const socket = await connect();
  const upstreamSide = upstream.sockets.at(-1)!;
  let upstreamGot = 0;
  upstreamSide.on('message', (data: Buffer) => (upstreamGot += data.length));
  const upstreamClosed = new Promise<number>((resolve) => upstreamSide.once('close', (code) => resolve(code)));
  const ended = closed(socket);
  socket.send(Buffer.alloc(LIMIT + 1, 1));
  t.equal((await ended).code, 1009, 'the browser sees 1009 (message too big)');
  t.equal(await upstreamClosed, 1009, 'the upstream is closed with 1009 too');
  t.equal(upstreamGot, 0, 'nothing of the message reached the upstream');
  await stillRelays(t);
});

t.test('an upstream message over the limit closes the socket with 1009 at the browser', async (t) => {
  const socket = await connect();
  let browserGot = 0;
  socket.on('message', (data: Buffer) => (browserGot += data.length));
  const ended = closed(socket);
  upstream.sockets.at(-1)!.send(Buffer.alloc(LIMIT + 1, 2));
  const { code, reason } = await ended;
  t.equal(code, 1009);
  t.equal(reason, 'message too big');
  t.equal(browserGot, 0, 'nothing of the message reached the browser');
  await stillRelays(t);
});
