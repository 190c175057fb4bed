import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A request a scripted upstream received. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
}

/** A bare HTTP server that answers as the test scripts it and records what reached it. */
export interface ScriptedUpstream {
  url: string;
  seen: SeenRequest[];
  /** How the next requests are answered; the default answers 200 `ok`. */
  answer: (req: IncomingMessage, res: ServerResponse) => void;
  close(): Promise<void>;
}

/**
 * Starts a loopback server that validates nothing, for what the demo upstream
 * cannot do: answer with hop-by-hop or odd headers, or stand for a host that
 * must never be contacted.
 * @example const evil = await startScriptedUpstream(); ...; t.equal(evil.seen.length, 0);
 */
export async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  const sockets = new Set<Socket>();
  const upstream: ScriptedUpstream = {
    url: '',
    seen: [],
    answer: (_req, res) => res.end('ok'),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    upstream.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => upstream.answer(req, res));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return upstream;
}
