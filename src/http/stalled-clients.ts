import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const EXCHANGE = Symbol('gatehouse.exchange');

interface TrackedSocket extends Socket {
  [EXCHANGE]?: { request: IncomingMessage; response: ServerResponse };
}

/**
 * Cuts clients that stall (README "Limits under abuse"): a connection with no
 * traffic for `idleTimeoutMs` is closed when
 * - a response is waiting for the client to read it (bytes queued on the
 *   socket: it stopped reading), or
 * - the client declared a request body and sends nothing of it, while the
 *   gateway has read all it sent (a trickled upload), or
 * - no request is in progress (an idle keep-alive connection).
 * Closing the client's socket ends the response stream, which aborts the
 * upstream request and releases its pooled connection. A request whose
 * response is only slow to come from the upstream (long polling, a quiet
 * server-sent events stream) has nothing waiting for the client and is left
 * alone. Node's socket timer restarts with any progress, a slow reader that
 * still reads included. Pinned by test/proxy/stalled-clients.test.ts.
 */
export function cutStalledClients(server: Server, idleTimeoutMs: number): void {
  if (idleTimeoutMs <= 0) return;
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as TrackedSocket;
    socket[EXCHANGE] = { request, response };
  });
  server.setTimeout(idleTimeoutMs, (socket: TrackedSocket) => {
    const exchange = socket[EXCHANGE];
    if (exchange === undefined || exchange.response.writableFinished || isStalled(socket, exchange.request, exchange.response)) {
      socket.destroy();
    }
  });
}

function isStalled(socket: Socket, request: IncomingMessage, response: ServerResponse): boolean {
  if (socket.writableLength > 0 || response.writableLength > 0) return true;
  return !request.complete && declaresBody(request) && request.readableLength === 0;
}

function declaresBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}
