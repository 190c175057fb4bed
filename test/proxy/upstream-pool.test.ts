import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { waitFor } from '../helpers/wait-for.js';

const CHUNK = Buffer.alloc(64 * 1024, 'x');
const BIG_BYTES = 64 * 1024 * 1024;
const STALLED_PER_USER = 47;

/** A node:http upstream: `/big` streams far more than any socket buffer (honouring back-pressure); anything else answers `ok`. */
async function startUpstream() {
  let bigRequests = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if ((req.url ?? '').startsWith('/big')) {
      bigRequests += 1;
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
    } else {
      req.resume();
      res.end('ok');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    bigRequests: () => bigRequests,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A client that asks for a download and reads none of it. */
async function stalledDownload(url: string, cookie: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.pause();
  socket.on('error', () => undefined);
  socket.write(`GET /big HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncookie: ${cookie}\r\n\r\n`);
  return socket;
}

/**
 * README "Limits under abuse": the connections to an upstream are not a
 * fixed pool by default (`limits.upstreamConnections: 0`), so three users,
 * each within limits.perUserConcurrency (64), holding 47 unread downloads
 * each (141 connections, more than the 128 of a fixed pool) never delay a
 * fourth user's request.
 */
t.test('three users with stalled downloads do not delay a fourth user', async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const h = await startHarness({ config: { upstream: upstream.url } });
  t.teardown(() => h.close());
  const stalled: Socket[] = [];
  t.teardown(() => stalled.forEach((socket) => socket.destroy()));
  for (const user of ['stall-1', 'stall-2', 'stall-3']) {
    const { cookie } = await signIn(h.url, { user });
    for (let i = 0; i < STALLED_PER_USER; i += 1) stalled.push(await stalledDownload(h.url, cookie));
  }
  const fourth = await signIn(h.url, { user: 'fourth' });
  await waitFor('every stalled download to reach the upstream', () => upstream.bigRequests() === 3 * STALLED_PER_USER, 15_000).catch(() => undefined);
  t.equal(upstream.bigRequests(), 3 * STALLED_PER_USER, 'every stalled download holds an upstream connection');
  const started = Date.now();
  const response = await fetch(`${h.url}/other`, { headers: { cookie: fourth.cookie }, signal: AbortSignal.timeout(5000) }).catch((err: Error) => err);
  t.ok(!(response instanceof Error) && response.status === 200, `the fourth user is served (${response instanceof Error ? response.name : response.status})`);
  if (!(response instanceof Error)) t.equal(await response.text(), 'ok');
  t.ok(Date.now() - started < 5000, `in ${Date.now() - started} ms`);
});
