/**
 * The bench's upstream, run as its own process: as little work per request
 * as node:http allows, so that what is measured is the proxy in front of it.
 * It validates no token (the demo upstream introspects every one, which would
 * measure the authorization server instead). Prints `{"port":N}` once listening.
 *
 * Routes: any GET -> ~100 bytes of JSON; GET /large?bytes=N -> N bytes of
 * text/plain in 64 KiB chunks; POST /upload -> reads the body, answers its length.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const SMALL = Buffer.from(JSON.stringify({ id: 4711, name: 'gatehouse bench', ok: true, tags: ['a', 'b', 'c'], at: '2025-01-01T00:00:00Z' }));
const SMALL_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'content-length': SMALL.length };
const CHUNK = Buffer.alloc(64 * 1024, 'x');
const LARGE_PREFIX = '/large?bytes=';

const server = createServer((req, res) => {
  if (req.method === 'POST') return upload(req, res);
  const url = req.url ?? '/';
  if (url.startsWith(LARGE_PREFIX)) return large(res, Number(url.slice(LARGE_PREFIX.length)));
  res.writeHead(200, SMALL_HEADERS);
  res.end(SMALL);
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 0;
server.requestTimeout = 0;

function large(res: ServerResponse, bytes: number): void {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': bytes });
  let left = bytes;
  const pump = (): void => {
    while (left > 0) {
      const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  res.once('close', () => {
    left = 0;
  });
  pump();
}

function upload(req: IncomingMessage, res: ServerResponse): void {
  let bytes = 0;
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on('end', () => {
    const body = JSON.stringify({ bytes });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
});
