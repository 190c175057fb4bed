import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { AuthorizationServer } from '../../src/demo/authorization-server.js';

/** What the upstream saw of one WebSocket handshake. */
export interface Handshake {
  headers: IncomingHttpHeaders;
  path: string;
  /** The bearer's subject by introspection at the AS, or undefined without an active bearer. */
  sub: string | undefined;
}

/** An upstream WebSocket server that echoes every message and records each handshake. */
export interface WebSocketUpstream {
  url: string;
  handshakes: Handshake[];
  /** Open sockets on the upstream side, newest last. */
  sockets: WebSocket[];
  /** Refuse the next handshakes with this status (undefined: accept). */
  refuseWith: number | undefined;
  /** Stop echoing (a slow reader on the upstream side: its socket is not read at all). */
  pauseReading: boolean;
  /** The AS that bearers are introspected at; set once it runs (the gateway's config needs this upstream's URL first). */
  as: AuthorizationServer | undefined;
  close(): Promise<void>;
}

/**
 * Starts a WebSocket upstream on loopback that introspects every bearer at
 * the real AS (`as`), picks the first subprotocol offered, and echoes
 * messages as they came (text as text, binary as binary).
 */
export async function startWebSocketUpstream(): Promise<WebSocketUpstream> {
  const server = createServer();
  const upstream: WebSocketUpstream = {
    url: '',
    handshakes: [],
    sockets: [],
    refuseWith: undefined,
    pauseReading: false,
    as: undefined,
    async close() {
      for (const socket of upstream.sockets) socket.terminate();
      wss.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => [...protocols][0] ?? false });
  server.on('upgrade', (request, socket, head) => {
    void (async () => {
      const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      let sub: string | undefined;
      const as = upstream.as;
      if (bearer !== undefined && as !== undefined) {
        const credentials = Buffer.from(`${as.introspection.clientId}:${as.introspection.clientSecret}`).toString('base64');
        const answer = await fetch(`${as.listenUrl}/token/introspection`, {
          method: 'POST',
          headers: { authorization: `Basic ${credentials}` },
          body: new URLSearchParams({ token: bearer }),
        });
        const introspection = (await answer.json()) as { active: boolean; sub?: string };
        sub = introspection.active ? introspection.sub : undefined;
      }
      upstream.handshakes.push({ headers: request.headers, path: request.url ?? '', sub });
      if (upstream.refuseWith !== undefined) {
        socket.end(`HTTP/1.1 ${upstream.refuseWith} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
        return;
      }
      wss.handleUpgrade(request, socket, head, (ws) => {
        upstream.sockets.push(ws);
        if (upstream.pauseReading) ws.pause();
        ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return upstream;
}
