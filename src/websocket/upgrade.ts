import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { fastifyCookie } from '@fastify/cookie';
import WebSocket, { WebSocketServer } from 'ws';
import { errorRow, gatehouseError, isGatehouseError, type ErrorCode } from '../errors.js';
import { endToEndHeaders } from '../http/hop-by-hop.js';
import type { GatewayContext } from '../plugins/gateway-context.js';
import { resolveSessionId, type ResolvedSession } from '../session/resolve.js';
import { admitFresh, type Admission } from '../routing/route-access.js';
import { upstreamPath, type Route } from '../routing/route-table.js';
import { isAmbiguousPath, isUnder } from '../config/route-paths.js';
import { relay } from './relay.js';
import type { OpenSockets } from './open-sockets.js';

/** A signed-in browser's session and what its route admitted. */
interface SignedIn {
  resolved: ResolvedSession;
  admission: Admission;
}

/** Request headers the upstream's handshake never gets from the browser: ws sets its own key, version and extensions. */
const HANDSHAKE_HEADERS = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol', 'host']);

/**
 * WebSocket upgrades on routes with `websocket: true` (README "WebSockets and
 * server-sent events"). Before the browser's handshake is answered: the
 * route's auth (401, never a redirect), the Origin (the publicUrl origin or
 * one of csrf.allowedOrigins, else 403), a stale token refreshed; then the
 * upstream's handshake, with the token, the identity headers and every
 * subprotocol the browser offered. Only when the upstream accepted is the
 * browser's upgrade completed, with the subprotocol the upstream chose; a
 * refusal reaches the browser with the upstream's status.
 */
export function proxyWebSockets(server: Server, context: GatewayContext, sockets: OpenSockets, log: FastifyBaseLogger): void {
  const { routes, cookies, clock, site, clientAddressing: addressing } = context;
  // ws closes a socket whose peer sends a larger message with 1009 before holding it whole.
  const maxPayload = context.config.limits.websocketMessageBytes;
  const browserSide = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload });
  const gatewayPaths = new Set(Object.values(context.config.paths));
  // Envoy's ext_authz asks at the forward-auth path + the original path: that whole subtree is the gateway's.
  const forwardAuthPath = context.config.paths.forwardAuth;

  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A client that goes away mid-handshake must not take the process with it.
    socket.on('error', () => socket.destroy());
    upgrade(request, socket, head).catch((err: unknown) => {
      if (isGatehouseError(err)) {
        refuse(socket, err.code as ErrorCode, err.statusCode);
        return;
      }
      log.error({ err }, 'websocket upgrade failed');
      refuse(socket, 'GH_ERR_INTERNAL');
    });
  });

  async function upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = request.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    if (isAmbiguousPath(path)) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'the path holds a "." or ".." segment or a backslash' });
    // The gateway's own paths come before every route, for an upgrade as for a request: a `/` route never gets them.
    if (gatewayPaths.has(path) || isUnder(path, forwardAuthPath)) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'this path does not accept WebSocket upgrades' });
    const route = routes.match(path);
    if (route === undefined) throw gatehouseError('GH_ERR_ROUTE_NOT_FOUND');
    if (!route.websocket) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'this path does not accept WebSocket upgrades' });
    // Browsers always send Origin on an upgrade: a missing or foreign one is cross-site WebSocket hijacking.
    const origin = request.headers.origin;
    if (origin === undefined || !site.allowedOrigins.has(origin)) throw gatehouseError('GH_ERR_CSRF_REJECTED');

    const session = route.auth === 'public' ? null : await signedIn(request, route);
    const headers = upstreamHeaders(request, route, session);
    const protocols = offeredProtocols(request.headers['sec-websocket-protocol']);
    const target = `${route.origin.replace(/^http/, 'ws')}${upstreamPath(route, url)}`;
    const upstream = new WebSocket(target, protocols, {
      headers,
      perMessageDeflate: false,
      followRedirects: false,
      handshakeTimeout: route.timeout * 1000,
      maxPayload,
    });
    upstream.once('unexpected-response', (_request, response) => {
      response.resume();
      refuseWithStatus(socket, response.statusCode ?? 502);
      upstream.terminate();
    });
    upstream.once('error', (err) => {
      if (upstream.readyState === WebSocket.CONNECTING || upstream.readyState === WebSocket.CLOSED) {
        log.warn({ failure: { type: err.name, endpoint: `${route.origin}${upstreamPath(route, path)}` } }, 'upstream websocket failed');
        refuse(socket, 'GH_ERR_UPSTREAM_UNAVAILABLE');
      }
    });
    upstream.once('open', () => {
      if (socket.destroyed) {
        upstream.terminate();
        return;
      }
      // Read synchronously inside handleUpgrade: the browser gets the subprotocol the upstream chose, or none.
      browserSide.options.handleProtocols = () => upstream.protocol || false;
      browserSide.handleUpgrade(request, socket, head, (browser) => {
        const opened = sockets.add({
          browser,
          upstream,
          route,
          hash: session?.resolved.hash,
          userKey: session?.resolved.session.userId,
          user: session?.admission.user,
          expiresAt: session?.resolved.session.expiresAt,
          openedAt: clock.now(),
        });
        relay(browser, upstream, opened);
      });
    });
  }

  /** The admitted user of a required or optional route; null when an optional route has none. */
  async function signedIn(request: IncomingMessage, route: Route): Promise<SignedIn | null> {
    const cookie = request.headers.cookie;
    const sessionId = cookie === undefined ? undefined : fastifyCookie.parse(cookie)[cookies.sessionName];
    const resolved = await resolveSessionId(context, sessionId, log, clock.now());
    if (resolved === null) {
      if (route.auth === 'required') throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      return null;
    }
    // A refresh the AS rejected has ended the session: on an optional route the socket opens without it.
    const admission = await admitFresh(context, route, resolved, log);
    if (admission === null) return null;
    if (!admission.allowed) throw gatehouseError('GH_ERR_NOT_ALLOWED', { detail: admission.user });
    return { resolved, admission };
  }

  function upstreamHeaders(request: IncomingMessage, route: Route, session: SignedIn | null): Record<string, string> {
    const peer = request.socket.remoteAddress ?? '';
    const replaced = addressing.replacedHeadersOf(peer);
    const incoming = endToEndHeaders(
      request.headers,
      (name) =>
        HANDSHAKE_HEADERS.has(name) || name === 'authorization' || name === 'dpop' || routes.identityHeaderNames.has(name) || replaced(name),
    );
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(incoming)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const cookie = request.headers.cookie === undefined ? undefined : cookies.stripOwn(request.headers.cookie);
    if (cookie !== undefined) headers.cookie = cookie;
    if (session !== null) {
      Object.assign(headers, session.admission.identity);
      if (route.sendsToken) headers.authorization = `Bearer ${session.admission.tokens.accessToken}`;
    }
    headers['x-forwarded-for'] = addressing.forwardedForPeer(peer, request.headers['x-forwarded-for']);
    headers['x-forwarded-proto'] = site.proto;
    headers['x-forwarded-host'] = site.host;
    return headers;
  }
}

function offeredProtocols(header: string | undefined): string[] {
  return header === undefined ? [] : header.split(',').map((protocol) => protocol.trim()).filter((protocol) => protocol !== '');
}

/** Answers a refused upgrade on the raw socket, as the gateway's JSON error. */
function refuse(socket: Duplex, code: ErrorCode, status = errorRow(code).status): void {
  const row = errorRow(code);
  const body = JSON.stringify(row.bare ? { error: row.slug } : { error: row.slug, message: gatehouseError(code).message });
  writeResponse(socket, status, body);
}

/** The upstream refused the handshake: the browser gets its status, not its body or headers. */
function refuseWithStatus(socket: Duplex, status: number): void {
  writeResponse(socket, status, '');
}

function writeResponse(socket: Duplex, status: number, body: string): void {
  if (socket.destroyed) return;
  const type = body === '' ? '' : 'Content-Type: application/json; charset=utf-8\r\n';
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${type}Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
  );
}
