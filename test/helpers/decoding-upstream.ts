import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/** What the upstream made of one request (or WebSocket handshake). */
export interface ReadRequest {
  /** The request target as it arrived. */
  target: string;
  /**
   * The path as a WSGI server hands it to the application (PEP 3333
   * PATH_INFO: percent-decoded once, `%2F` becoming `/`), or, when it
   * honours X-Original-URL (Symfony, IIS), that header's path instead.
   */
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  upgrade: boolean;
}

/** An upstream that reads paths as WSGI does, and optionally routes on X-Original-URL; it records every request and counts connections. */
export interface DecodingUpstream {
  url: string;
  read: ReadRequest[];
  /** TCP connections ever accepted (a handshake the gateway should have refused must not open one). */
  connections: number;
  /** Open WebSockets on the upstream side. */
  sockets: WebSocket[];
  close(): Promise<void>;
}

/** `unquote` as Python's urllib does it for PATH_INFO: every valid `%XY` decoded, once; invalid ones left as they are. */
export function wsgiPath(target: string): string {
  const path = target.split('?')[0]!;
  return Buffer.from(path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))), 'latin1').toString('utf8');
}

/**
 * A `node:http` upstream standing for a Flask/Django (WSGI) application:
 * it answers 200 with JSON `{ path }` where `path` is what the application
 * would route on. `honourOriginalUrl` makes it act on X-Original-URL, as
 * Symfony and IIS's URL Rewrite do. WebSocket upgrades are accepted (and
 * echo) on any path.
 */
export async function startDecodingUpstream(options: { honourOriginalUrl?: boolean } = {}): Promise<DecodingUpstream> {
  const open = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true });
  const upstream: DecodingUpstream = {
    url: '',
    read: [],
    connections: 0,
    sockets: [],
    close: async () => {
      for (const socket of upstream.sockets) socket.terminate();
      for (const socket of open) socket.destroy();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  function record(req: IncomingMessage, upgrade: boolean): ReadRequest {
    const override = options.honourOriginalUrl ? req.headers['x-original-url'] : undefined;
    const target = req.url ?? '';
    const read = { target, path: wsgiPath(typeof override === 'string' ? override : target), method: req.method ?? '', headers: req.headers, upgrade };
    upstream.read.push(read);
    return read;
  }
  const server = createServer((req, res) => {
    const read = record(req, false);
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: read.path })));
  });
  server.on('connection', (socket: Socket) => {
    upstream.connections += 1;
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  server.on('upgrade', (req, socket, head) => {
    record(req, true);
    wss.handleUpgrade(req, socket, head, (ws) => {
      upstream.sockets.push(ws);
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return upstream;
}
