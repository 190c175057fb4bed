import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { waitFor } from '../helpers/wait-for.js';

const CHUNK = Buffer.alloc(64 * 1024, 'x');
const BIG_BYTES = 256 * 1024 * 1024;

/** What the upstream saw of each request: whether its response (or its request body) was cut before the end. */
interface Exchange {
  path: string;
  responseClosedEarly: boolean;
  requestAborted: boolean;
  bodyBytes: number;
}

/**
 * An upstream with the behaviours a stall test needs: `/big` streams far
 * more than any socket buffer (honouring back-pressure), `/poll` answers
 * after 2.5 s of silence, `/events` sends an event, stays quiet 2.5 s and
 * sends another, `/upload` reads a body; anything else answers `ok`.
 */
async function startStallUpstream() {
  const exchanges: Exchange[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const exchange: Exchange = { path: req.url ?? '', responseClosedEarly: false, requestAborted: false, bodyBytes: 0 };
    exchanges.push(exchange);
    res.on('close', () => {
      if (!res.writableFinished) exchange.responseClosedEarly = true;
    });
    req.on('data', (chunk: Buffer) => (exchange.bodyBytes += chunk.length));
    req.on('close', () => {
      if (!req.complete) exchange.requestAborted = true;
    });
    const path = req.url ?? '';
    if (path.startsWith('/big')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG_BYTES });
      let sent = 0;
      const pump = () => {
        while (sent < BIG_BYTES && !res.destroyed) {
          sent += CHUNK.length;
          if (!res.write(CHUNK)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    } else if (path.startsWith('/poll')) {
      setTimeout(() => res.end('news'), 2500);
    } else if (path.startsWith('/events')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      res.write('data: one\n\n');
      setTimeout(() => res.end('data: two\n\n'), 2500);
    } else if (path.startsWith('/upload')) {
      req.on('end', () => res.end(`got ${exchange.bodyBytes}`));
    } else {
      req.resume();
      res.end('ok');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    exchanges,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** A raw client connection that sends `head` (and `body`) and reads nothing until told. */
async function rawClient(url: string, head: string, body = ''): Promise<{ socket: Socket; closed: Promise<void> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.pause();
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  socket.write(head + body);
  return { socket, closed };
}

/**
 * README "Limits under abuse": a client that reads nothing while data waits for it, or sends
 * nothing of a declared body, for `server.idleTimeout` is disconnected and
 * its upstream connection released; other users keep being served; a
 * response only slow to come from the upstream (long poll, quiet SSE) is
 * never cut. idleTimeout is 1 s here; the upstream stays quiet 2.5 s.
 */
t.test('stalled clients are cut, slow upstream answers are not', async (t) => {
  const upstream = await startStallUpstream();
  t.teardown(() => upstream.close());
  const h = await startHarness({ config: { upstream: upstream.url, server: { idleTimeout: 1 } } });
  t.teardown(() => h.close());
  const alice = await signIn(h.url, { user: 'alice' });
  const bob = await signIn(h.url, { user: 'bob' });
  const host = new URL(h.url).host;

  t.test('a client that stops reading a large response', async (t) => {
    const { socket, closed } = await rawClient(h.url, `GET /big HTTP/1.1\r\nhost: ${host}\r\ncookie: ${alice.cookie}\r\n\r\n`);
    t.teardown(() => socket.destroy());
    await waitFor('the upstream to see the request', async () => upstream.exchanges.some((e) => e.path === '/big'));
    const other = await fetch(`${h.url}/other`, { headers: { cookie: bob.cookie } });
    t.equal(other.status, 200, 'another user is served while the client stalls');
    t.equal(await other.text(), 'ok');
    await waitFor('the upstream response to be released', async () => upstream.exchanges.find((e) => e.path === '/big')!.responseClosedEarly, 15_000);
    t.pass('its upstream connection was released');
    socket.resume();
    await closed;
    t.pass('and the client was disconnected');
  });

  t.test('a client that declares a body and trickles it', async (t) => {
    const { socket, closed } = await rawClient(
      h.url,
      `POST /upload HTTP/1.1\r\nhost: ${host}\r\ncookie: ${alice.cookie}\r\ncontent-type: application/octet-stream\r\ncontent-length: 100000\r\n\r\n`,
      'ten bytes.',
    );
    t.teardown(() => socket.destroy());
    socket.resume();
    await closed;
    t.pass('the client was disconnected');
    await waitFor('the upstream request to be aborted', async () => upstream.exchanges.find((e) => e.path === '/upload')?.requestAborted === true, 15_000);
    t.pass('its upstream request was ended');
  });

  t.test('a long poll answered after a silence longer than idleTimeout', async (t) => {
    const response = await fetch(`${h.url}/poll`, { headers: { cookie: alice.cookie } });
    t.equal(response.status, 200);
    t.equal(await response.text(), 'news', 'arrives whole');
  });

  t.test('a quiet event stream', async (t) => {
    const response = await fetch(`${h.url}/events`, { headers: { cookie: alice.cookie } });
    t.equal(response.headers.get('content-type'), 'text/event-stream');
    t.equal(await response.text(), 'data: one\n\ndata: two\n\n', 'both events arrive across the silence');
  });

  t.test('a slow upload that keeps sending is not cut', async (t) => {
    const { socket, closed } = await rawClient(
      h.url,
      `POST /upload HTTP/1.1\r\nhost: ${host}\r\ncookie: ${alice.cookie}\r\ncontent-type: application/octet-stream\r\ncontent-length: 40\r\nconnection: close\r\n\r\n`,
    );
    socket.resume();
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    for (let i = 0; i < 4; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 600));
      socket.write('0123456789');
    }
    await closed;
    t.match(Buffer.concat(received).toString('latin1'), /^HTTP\/1\.1 200[\s\S]*got 40$/, 'the upload completes after 2.4 s at 10 bytes per 0.6 s');
  });
});
