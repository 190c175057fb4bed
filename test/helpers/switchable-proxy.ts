import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the proxy in front of the AS does with each request. */
export type ProxyMode = 'up' | 'down' | 'error503' | 'error400' | 'error429' | 'html400';

/**
 * A loopback HTTP proxy put in front of the authorization server so a test
 * can simulate an outage (`down` resets connections), a 5xx, or odd 4xx
 * answers, then recover, without restarting the AS.
 */
/** One request the proxy passed on to the AS, with its answer's status. */
export interface ProxiedExchange {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  status: number;
}

export class SwitchableProxy {
  mode: ProxyMode = 'up';
  target = '';
  /** When set, each request passed on is buffered and reported here once the AS answered (to read what a client sent). */
  recorder: ((exchange: ProxiedExchange) => void) | undefined;
  /** Modes for single paths, before `mode` (`pathModes.set('/me', 'error503')`: userinfo alone is down). */
  readonly pathModes = new Map<string, ProxyMode>();
  /**
   * When set, a JSON object the AS answers is passed through this before it
   * reaches the client (an AS that misbehaves on one endpoint: a userinfo
   * answer naming another `sub`, say); return it unchanged to leave it alone.
   */
  rewriteJson: ((path: string, body: Record<string, unknown>) => Record<string, unknown>) | undefined;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  private constructor(server: Server) {
    this.#server = server;
    server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  /** Listens on an ephemeral loopback port; set `target` before use. */
  static async start(): Promise<SwitchableProxy> {
    let proxy!: SwitchableProxy;
    const server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://proxy').pathname;
      switch (proxy.pathModes.get(path) ?? proxy.mode) {
        case 'down':
          req.socket.destroy();
          return;
        case 'error503':
          res.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable');
          return;
        case 'error429':
          res.writeHead(429, { 'content-type': 'application/json' }).end('{"error":"slow_down"}');
          return;
        case 'error400':
          res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_request"}');
          return;
        case 'html400':
          res.writeHead(400, { 'content-type': 'text/html' }).end('<h1>bad</h1>');
          return;
        default: {
          const target = new URL(req.url ?? '/', proxy.target);
          const recorder = proxy.recorder;
          const chunks: Buffer[] = [];
          const upstream = httpRequest(target, { method: req.method, headers: req.headers }, (answer) => {
            recorder?.({
              method: req.method ?? '',
              path: target.pathname,
              headers: req.headers,
              body: Buffer.concat(chunks).toString('utf8'),
              status: answer.statusCode ?? 0,
            });
            const rewrite = proxy.rewriteJson;
            if (rewrite === undefined || !/^application\/json/.test(answer.headers['content-type'] ?? '')) {
              res.writeHead(answer.statusCode ?? 502, answer.headers);
              answer.pipe(res);
              return;
            }
            const parts: Buffer[] = [];
            answer.on('data', (chunk: Buffer) => parts.push(chunk));
            answer.on('end', () => {
              const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as unknown;
              const text = typeof body === 'object' && body !== null && !Array.isArray(body) ? JSON.stringify(rewrite(target.pathname, body as Record<string, unknown>)) : JSON.stringify(body);
              const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(text)) };
              delete headers['transfer-encoding'];
              delete headers.etag;
              res.writeHead(answer.statusCode ?? 502, headers).end(text);
            });
          });
          upstream.on('error', () => res.destroy());
          if (recorder) req.on('data', (chunk: Buffer) => chunks.push(chunk));
          req.pipe(upstream);
        }
      }
    });
    proxy = new SwitchableProxy(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
