import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { fastifyCookie } from '@fastify/cookie';
import WebSocket, { WebSocketServer } from 'ws';
import { gatehouseError, isGatehouseError, type GatehouseError } from '../errors.js';
import type { GatewayContext } from '../context.js';
import { rawErrorResponse, rawResponse } from '../http/error-response.js';
import { requestId } from '../http/request-id.js';
import { normalPath } from '../http/request-path.js';
import { resolveSessionId, type ResolvedSession } from '../access/resolve.js';
import { admitFresh, refusedUser, type Admission } from '../access/admission.js';
import { isRequestView, requestView, type RequestView } from '../access/request-view.js';
import type { RouteTable } from '../routing/route-table.js';
import { ANONYMOUS, UpstreamHeaders, callerIdentity, upstreamAssertion, upstreamProof, upstreamToken, upstreamUrl, withAssertion, type UpstreamPass } from '../access/upstream-identity.js';
import { isUnder } from '../config/route-paths.js';
import { bearerChallenge, bearerToken, callerForbidden, type CallerAdmission } from '../access/bearer.js';
import { relay } from './relay.js';
import { stepUpError, stepUpRefusal } from '../access/step-up.js';
import type { OpenSockets } from './open-sockets.js';

/** A signed-in browser's session and what its route admitted. */
interface SignedIn {
  resolved: ResolvedSession;
  admission: Admission;
}

/** Request headers the upstream's handshake never gets from the browser: ws sets its own key, version, extensions and Host. */
const HANDSHAKE_HEADERS = ['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol', 'host'];

/** RFC 6455 §4.1: the key is 16 random bytes, base64: 22 characters and `==`. */
const WEBSOCKET_KEY = /^[A-Za-z0-9+/]{22}==$/;

/**
 * WebSocket upgrades on routes with `websocket: true` (README "WebSockets and
 * server-sent events"). Before anything goes upstream: the browser's
 * handshake (RFC 6455 §4.1: GET, HTTP/1.1, a 16-byte key, version 13, an
 * origin-form target; else 400), the path rule and the route table
 * (src/access/request-view.ts), the route's auth (401, never a redirect),
 * the Origin (the publicUrl origin or one of csrf.allowedOrigins, else
 * 403), a stale token refreshed, `allow`. Then the upstream's handshake, to
 * the route's origin, with what src/access/upstream-identity.ts puts on
 * every upstream request (the token, Bearer or DPoP with a proof, the
 * identity headers, X-Request-Id, X-Forwarded-*, the cookies without the
 * gateway's) and every subprotocol the browser offered. Only when the
 * upstream accepted is the browser's upgrade completed, with the
 * subprotocol the upstream chose; a refusal reaches the browser with the
 * upstream's status.
 */
export function proxyWebSockets(server: Server, context: GatewayContext, sockets: OpenSockets, log: FastifyBaseLogger): void {
  const { cookies, clock, providers, clientAddressing: addressing, bearer } = context;
  // ws closes a socket whose peer sends a larger message with 1009 before holding it whole.
  const maxPayload = context.config.limits.websocketMessageBytes;
  const browserSide = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload });
  const gatewayPaths = new Set(Object.values(context.config.paths));
  // Envoy's ext_authz asks at the forward-auth path + the original path: that whole subtree is the gateway's.
  const forwardAuthPath = context.config.paths.forwardAuth;
  const upstreamHeaders = new UpstreamHeaders(context, HANDSHAKE_HEADERS);
  const socketLimit = context.config.limits.perUserConcurrency;

  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A client that goes away mid-handshake must not take the process with it.
    socket.on('error', () => socket.destroy());
    upgrade(request, socket, head).catch((err: unknown) => {
      if (isGatehouseError(err)) {
        refuse(socket, err);
        return;
      }
      log.error({ err }, 'websocket upgrade failed');
      refuse(socket, gatehouseError('GH_ERR_INTERNAL'));
    });
  });

  async function upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // With `sites`, the host picks the route table; a host no site has gets 404 and nothing goes upstream (README "Several sites").
    const site = context.sites.of(request.headers, request.socket.remoteAddress);
    if (site === undefined) throw gatehouseError('GH_ERR_SITE_UNKNOWN');
    const invalid = handshakeProblem(request);
    if (invalid !== undefined) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: invalid });
    const view = viewOf(request.url!, site.routes);
    const { route } = view;
    const token = route.auth !== 'public' && route.acceptsBearer ? bearerToken(request.headers.authorization) : undefined;
    // Browsers always send Origin on an upgrade: a missing or foreign one is cross-site WebSocket hijacking.
    // A browser cannot set Authorization on one, so a machine client's token is no such risk (README "Machine clients").
    const origin = request.headers.origin;
    if (token === undefined && (origin === undefined || !site.allowedOrigins.has(origin))) throw gatehouseError('GH_ERR_CSRF_REJECTED');

    const caller = token === undefined ? null : await machineCaller(view, token);
    const session = route.auth === 'public' || caller !== null || !route.acceptsSession ? null : await signedIn(request, view, site.provider);
    if (caller === null && session === null && !route.acceptsSession && route.auth === 'required') throw gatehouseError('GH_ERR_BEARER_REQUIRED');
    const target = upstreamUrl(route, view.upstreamPath, view.query);
    const pass = caller !== null ? { identity: await callerIdentity(context, route, caller, clock.now()), token: upstreamToken(route, caller), proof: '' } : session === null ? ANONYMOUS : await passFor(view, session, target);
    const peer = request.socket.remoteAddress ?? '';
    const forwardedFor = addressing.forwardedForPeer(peer, request.headers['x-forwarded-for']);
    // limits.perUserConcurrency sockets per user, as many per client address without a session; counted from here, before
    // anything goes upstream, so that upgrades still opening count too.
    const holder = session === null ? `a:${clientAddressOf(forwardedFor)}` : `u:${session.resolved.session.userId}`;
    if (!sockets.take(holder, socketLimit)) throw gatehouseError('GH_ERR_WEBSOCKET_LIMIT');
    let held = true;
    let upgraded = false;
    const release = () => {
      if (!held) return;
      held = false;
      sockets.give(holder);
    };
    socket.once('close', () => {
      // Closed before the upgrade completed (refused, failed, or the browser went away): the slot goes back.
      if (!upgraded) release();
    });
    const headers = upstreamHeaders.forUpstream(request.headers, peer, forwardedFor, requestId(request), pass, site);
    target.protocol = target.protocol === 'https:' ? 'wss:' : 'ws:';
    const upstream = new WebSocket(target, offeredProtocols(request.headers['sec-websocket-protocol']), {
      headers: singleValued(headers),
      perMessageDeflate: false,
      followRedirects: false,
      handshakeTimeout: route.timeout * 1000,
      maxPayload,
    });
    upstream.once('unexpected-response', (_request, response) => {
      response.resume();
      if (!socket.destroyed) socket.end(rawResponse(response.statusCode ?? 502, ''));
      upstream.terminate();
    });
    upstream.once('error', (err) => {
      if (upstream.readyState === WebSocket.CONNECTING || upstream.readyState === WebSocket.CLOSED) {
        log.warn({ failure: { type: err.name, endpoint: `${route.origin}${view.upstreamPath}` } }, 'upstream websocket failed');
        refuse(socket, gatehouseError('GH_ERR_UPSTREAM_UNAVAILABLE'));
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
        upgraded = true;
        const opened = sockets.add({
          release,
          browser,
          upstream,
          route,
          hash: session?.resolved.hash,
          userKey: session?.resolved.session.userId ?? caller?.userKey,
          user: session?.admission.user ?? caller?.user,
          expiresAt: session?.resolved.session.expiresAt,
          openedAt: clock.now(),
        });
        relay(browser, upstream, opened);
      });
    });
  }

  /** The request's view; throws the 400 (the path rule, a gateway path, a route without `websocket`) or 404. */
  function viewOf(target: string, routes: RouteTable): RequestView {
    // The gateway's own paths come before every route, for an upgrade as for a request: a `/` route never gets them.
    const query = target.indexOf('?');
    const normal = normalPath(query < 0 ? target : target.slice(0, query));
    if (normal.ok && (gatewayPaths.has(normal.match) || isUnder(normal.match, forwardAuthPath))) {
      throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'this path does not accept WebSocket upgrades' });
    }
    const view = requestView(routes, target, 'GET');
    if (!isRequestView(view)) throw view;
    if (!view.route.websocket) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'this path does not accept WebSocket upgrades' });
    return view;
  }

  /** A machine client admitted by its own token; throws its 401, 403 or 503. */
  async function machineCaller(view: RequestView, token: string): Promise<CallerAdmission> {
    const admission = await bearer!.admit(view.route, token, log);
    if (admission.verdict === 'forbidden') throw callerForbidden(admission);
    return admission;
  }

  /** The admitted user of a required or optional route; null when an optional route has none. */
  async function signedIn(request: IncomingMessage, view: RequestView, provider: string): Promise<SignedIn | null> {
    const { route } = view;
    const cookie = request.headers.cookie;
    const sessionId = cookie === undefined ? undefined : fastifyCookie.parse(cookie)[cookies.sessionName];
    // Only a session of the site's provider (README "Several identity providers").
    const resolved = await resolveSessionId(context, sessionId, log, clock.now(), provider);
    if (resolved === null) {
      if (route.auth === 'required') throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      return null;
    }
    // A refresh the AS rejected has ended the session: on an optional route the socket opens without it.
    const admission = await admitFresh(context, route, resolved, log);
    if (admission === null) return null;
    if (admission.verdict === 'forbidden') throw gatehouseError('GH_ERR_NOT_ALLOWED', { detail: refusedUser(route, admission) });
    // No browser follows a redirect from a WebSocket handshake: 401 with the RFC 9470 challenge (README "Step-up").
    if (admission.verdict === 'step-up') throw stepUpError(stepUpRefusal(context.links, route.stepUp!, `${context.links.basePath}/`));
    return { resolved, admission };
  }

  /** The identity headers and the token for the upstream's handshake; with `provider.dpop`, its proof for that GET (RFC 9449 §7.1). */
  async function passFor(view: RequestView, session: SignedIn, target: URL): Promise<UpstreamPass> {
    const { admission, resolved } = session;
    const token = upstreamToken(view.route, admission);
    const proof = token === '' ? '' : upstreamProof(providers, admission.tokens, 'GET', target, admission.target);
    const assertion = upstreamAssertion(context, view.route, resolved.hash, admission, clock.now());
    return { identity: assertion === undefined ? admission.identity : withAssertion(admission.identity, view.route, await assertion), token, proof };
  }
}

/**
 * Why the browser's handshake is not one RFC 6455 §4.1 allows, or
 * undefined: checked before anything else, so a malformed upgrade never
 * costs an upstream connection.
 */
export function handshakeProblem(request: IncomingMessage): string | undefined {
  if (request.method !== 'GET') return 'a WebSocket handshake is a GET';
  if (request.httpVersion !== '1.1') return 'a WebSocket handshake is HTTP/1.1';
  if (request.headers.upgrade?.toLowerCase() !== 'websocket') return 'only WebSocket upgrades are accepted';
  const key = request.headers['sec-websocket-key'];
  if (key === undefined || !WEBSOCKET_KEY.test(key)) return 'Sec-WebSocket-Key is not 16 bytes in base64';
  if (request.headers['sec-websocket-version'] !== '13') return 'Sec-WebSocket-Version is not 13';
  if (request.url === undefined || request.url[0] !== '/') return 'the request target is not a path';
  return undefined;
}

/** The client address: the leftmost of the trusted X-Forwarded-For chain (the TCP peer without trusted proxies). */
function clientAddressOf(forwardedFor: string): string {
  const comma = forwardedFor.indexOf(',');
  return comma < 0 ? forwardedFor : forwardedFor.slice(0, comma);
}

function offeredProtocols(header: string | undefined): string[] {
  return header === undefined ? [] : header.split(',').map((protocol) => protocol.trim()).filter((protocol) => protocol !== '');
}

/** ws takes one value per header: repeated ones joined as HTTP allows (RFC 9110 §5.3). */
function singleValued(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const single: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) single[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return single;
}

/** Answers a refused upgrade on the raw socket with the gateway's error answer. */
function refuse(socket: Duplex, error: GatehouseError): void {
  if (socket.destroyed) return;
  const challenge = bearerChallenge(error);
  socket.end(challenge === undefined ? rawErrorResponse(error) : rawErrorResponse(error).replace('\r\n', `\r\nWWW-Authenticate: ${challenge}\r\n`));
}
