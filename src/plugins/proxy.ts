import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { Agent, type Dispatcher } from 'undici';
import { gatehouseError } from '../errors.js';
import { requestCheck } from '../http/csrf.js';
import { endToEndHeaders } from '../http/hop-by-hop.js';
import { isNavigation } from '../http/request-kind.js';
import { resolveCached, resolveStored, type ResolvedSession } from '../session/resolve.js';
import { sendError, signInLink } from './errors.js';
import { causeCode } from '../oauth/provider.js';
import type { TokenRecord } from '../session/store.js';
import { upstreamPath, type Route } from '../routing/route-table.js';
import { isAmbiguousPath } from '../config/route-paths.js';
import { admit, admitFresh, type Admission } from '../routing/route-access.js';

/** What the proxy keeps of one request while it is under way: one object per proxied request. */
export interface Exchange {
  /** The route the request's path matched (README "Routes"). */
  route: Route;
  /** The upstream path (without the query, which reply-from appends), kept for a retry and the failure log. */
  path: string;
  /** The route's identity headers for the signed-in user; undefined without a user or headers. */
  identity: Record<string, string> | undefined;
  /** The access token to send upstream; '' sends none. */
  token: string;
  /** With `provider.dpop`: the DPoP proof sent with it (RFC 9449 §7.1); '' otherwise. */
  proof: string;
  /** When the request was handed to the upstream (hrtime ns), for the latency histogram. */
  startedAt: bigint;
  /** Seconds the upstream took to answer with its head; -1 until it has. */
  seconds: number;
  /** The key of the signed-in user's token record (src/oauth/identify.ts); '' without a user. */
  userKey: string;
  /** Whether an upstream 401 may be retried once with a new access token (see `onResponse`). */
  retryable: boolean;
  /** Whether this request is that retry. */
  retried: boolean;
  /** Whether this request counts toward its user's `limits.perUserConcurrency`. */
  holdsSlot: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A proxied request's state (README "How it works"); null for the gateway's own paths and before a route matched. */
    exchange: Exchange | null;
    /** The signed-in user as shown (the `userIdClaim` value), for the access log. */
    userId: string | undefined;
  }
}

/** The request whose per-user slot a response gives back when it closes (no closure per request on the hot path). */
const SLOT_OWNER = Symbol('gatehouse.slotOwner');
type SlotHolder = ServerResponse & { [SLOT_OWNER]?: FastifyRequest };

/** The answer to every request without a session on a required route: built once, never thrown (no stack trace per request). */
const NOT_SIGNED_IN = gatehouseError('GH_ERR_SESSION_REQUIRED');

/** Methods whose request, without a body, can be sent twice: safe and bodiless (RFC 9110 §9.2.1). */
const RETRYABLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The part of @fastify/reply-from's upstream response that `onResponse` reads. */
interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  stream: Readable;
}

/**
 * Incoming request headers never passed on as they are, besides those
 * ClientAddressing replaces: the browser's Authorization and DPoP (the
 * gateway's own or none) and every identity header any route names (a
 * client never chooses its identity, README "Routes").
 */
function gatewaySetHeaders(identityHeaderNames: ReadonlySet<string>): (name: string) => boolean {
  return (name) => name === 'authorization' || name === 'dpop' || identityHeaderNames.has(name);
}

/**
 * The connection pools to the upstreams: undici keeps one pool per origin, so
 * each route's upstream has its own. reply-from gives every request one
 * `timeout` for both the response head and each body chunk; here it bounds
 * only the head (the route's `timeout`), and a long stream (server-sent
 * events) keeps the pool's body timeout.
 */
class UpstreamAgent extends Agent {
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    options.bodyTimeout = null;
    return super.dispatch(options, handler);
  }
}

/**
 * Every path that is not the gateway's own goes to the upstream of the route
 * it matches (README "Routes", "How it works"). The preHandler is the hot
 * path and reads top to bottom: route, CSRF check, cookie, session (LRU
 * lookups), token (a refresh only when stale), who may pass, headers.
 */
export const proxyPlugin = fp(
  async (fastify) => {
    const { config, cookies, refresher, metrics, dpop, routes, basePath, site, crossSite, clientAddressing, clock } = fastify.gatehouse;
    const isCrossSite = requestCheck(crossSite);
    const isGatewaySet = gatewaySetHeaders(routes.identityHeaderNames);
    /** ClientAddressing's predicate (one of two) -> it or isGatewaySet, built once each: no closure per request. */
    const replacedWith = new Map<(name: string) => boolean, (name: string) => boolean>();
    const loginHref = `${basePath}${config.paths.login}`;
    const signOut = { href: `${basePath}${config.paths.logout}`, text: 'Sign out' };

    fastify.decorateRequest('exchange', null);
    fastify.decorateRequest('userId', undefined);
    const perUserLimit = config.limits.perUserConcurrency;
    /** userKey -> proxied requests of that user in flight on this replica. */
    const inFlight = new Map<string, number>();
    /**
     * userId -> the access token that the upstream refused even right after
     * a replacement: a path that answers 401 whatever the token must not
     * cost a refresh on every request. Cleared once the user has another token.
     */
    const refusedAfterRetry = new LRUCache<string, string>({ max: config.session.cacheSize });
    /** @fastify/http-proxy's reply options (the same object for every request), kept for the retry. */
    let fromOptions: unknown;

    /**
     * The proxy's preHandler. A signed-in request whose session and fresh
     * token are in the cache is decided without a promise (the hot path:
     * BENCHMARKS.md); anything that needs the store or the AS goes through
     * {@link authenticateUser}.
     */
    function authenticate(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
      const exchange = matchRoute(request);
      const { route } = exchange;
      if (route.auth !== 'public') {
        const now = clock.now();
        const resolved = resolveCached(fastify.gatehouse, request.cookies[cookies.sessionName], now);
        // A DPoP proof is signed asynchronously: such a request always takes the async path.
        if (resolved == null || dpop || !refresher.isFresh(resolved.tokens, now)) {
          authenticateUser(request, reply, exchange, resolved, now).then((answered) => {
            if (answered === undefined) exchange.startedAt = process.hrtime.bigint();
            done();
          }, done);
          return;
        }
        if (isCrossSite(request)) throw gatehouseError('GH_ERR_CSRF_REJECTED');
        enter(request, reply, exchange, resolved);
        if (pass(request, reply, exchange, admit(route, resolved, resolved.tokens), resolved.tokens) !== undefined) return;
      }
      exchange.startedAt = process.hrtime.bigint();
      done();
    }

    /** The request's route and its Exchange; throws the 400 or 404 that ends it. */
    function matchRoute(request: FastifyRequest): Exchange {
      const { url } = request;
      const query = url.indexOf('?');
      const path = query < 0 ? url : url.slice(0, query);
      // `/assets/../admin` could match one route here and mean another at the upstream.
      if (isAmbiguousPath(path)) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'the path holds a "." or ".." segment or a backslash' });
      const route = routes.match(path);
      if (route === undefined) throw gatehouseError('GH_ERR_ROUTE_NOT_FOUND');
      const exchange: Exchange = {
        route,
        path: upstreamPath(route, path),
        identity: undefined,
        token: '',
        proof: '',
        startedAt: 0n,
        seconds: -1,
        userKey: '',
        retryable: false,
        retried: false,
        holdsSlot: false,
      };
      request.exchange = exchange;
      return exchange;
    }

    /**
     * Session, token, `allow` and identity headers of a required or optional
     * route, when the cache alone could not decide (`cached` is what it
     * knew); a reply when the request ends here.
     */
    async function authenticateUser(
      request: FastifyRequest,
      reply: FastifyReply,
      exchange: Exchange,
      cached: ResolvedSession | null | undefined,
      now: number,
    ): Promise<FastifyReply | undefined> {
      const { route } = exchange;
      const required = route.auth === 'required';
      const crossSite = isCrossSite(request);
      if (required && crossSite) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      const resolved = cached === undefined ? await resolveStored(fastify.gatehouse, request.cookies[cookies.sessionName]!, request.log, now) : cached;
      if (!resolved) {
        if (required) return unauthenticated(request, reply, route);
        if (request.cookies[cookies.sessionName] !== undefined) cookies.clearSession(reply);
        return undefined;
      }
      // The CSRF rule holds for every request proxied with a session (SPEC §9).
      if (crossSite) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      enter(request, reply, exchange, resolved);
      const admission = await admitFresh(fastify.gatehouse, route, resolved, request.log);
      if (admission === null) {
        // An optional route whose session the AS just ended (a rejected refresh) goes on without it.
        cookies.clearSession(reply);
        releaseUserSlot(request);
        request.userId = undefined;
        return undefined;
      }
      const answered = pass(request, reply, exchange, admission, resolved.tokens);
      if (answered === undefined && dpop && exchange.token !== '') exchange.proof = await upstreamProof(request, route, admission.tokens);
      return answered;
    }

    /** A signed-in request enters: who it is, and one of its user's `limits.perUserConcurrency` slots (429 when none is left). */
    function enter(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, resolved: ResolvedSession): void {
      exchange.userKey = resolved.session.userId;
      request.userId = resolved.tokens.user ?? resolved.session.userId;
      if (perUserLimit > 0) takeUserSlot(request, reply);
    }

    /**
     * What goes upstream for an admitted user: the 403 when `allow` refuses
     * them, else the identity headers and the token. `resolvedTokens` is the
     * record before any refresh: a token issued during this very request is
     * not worth replacing if the upstream refuses it.
     */
    function pass(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, admission: Admission, resolvedTokens: TokenRecord): FastifyReply | undefined {
      const { tokens } = admission;
      if (!admission.allowed) {
        request.errorCode = 'GH_ERR_NOT_ALLOWED';
        return sendError(request, reply, gatehouseError('GH_ERR_NOT_ALLOWED', { detail: admission.user }), signOut);
      }
      exchange.identity = admission.identity;
      if (!exchange.route.sendsToken) return undefined;
      exchange.token = tokens.accessToken;
      exchange.retryable =
        tokens === resolvedTokens && RETRYABLE_METHODS.has(request.method) && !hasBody(request) && refusedAfterRetry.peek(exchange.userKey) !== tokens.accessToken;
      return undefined;
    }

    /**
     * A required route without a session (SPEC §4): a GET or HEAD navigation
     * goes through sign-in and back (`onUnauthenticated: auto`), unless this
     * browser has just signed in and came back without the session cookie:
     * it refused it, and another redirect would loop. Everything else gets
     * 401, JSON or the sign-in page.
     */
    function unauthenticated(request: FastifyRequest, reply: FastifyReply, route: Route): FastifyReply {
      if (route.onUnauthenticated === '401') {
        request.errorCode = NOT_SIGNED_IN.code;
        return sendError(request, reply, NOT_SIGNED_IN, undefined, 'json');
      }
      if (route.onUnauthenticated === 'page' || (request.method !== 'GET' && request.method !== 'HEAD') || !isNavigation(request)) {
        request.errorCode = NOT_SIGNED_IN.code;
        return sendError(request, reply, NOT_SIGNED_IN);
      }
      const hasSessionCookie = request.cookies[cookies.sessionName] !== undefined;
      if (!hasSessionCookie && request.cookies[cookies.signedInName] !== undefined) {
        request.errorCode = 'GH_ERR_COOKIE_REFUSED';
        return sendError(request, reply, gatehouseError('GH_ERR_COOKIE_REFUSED'), signInLink(request, basePath, config.paths.login));
      }
      if (hasSessionCookie) cookies.clearSession(reply);
      return reply
        .header('cache-control', 'no-store')
        .redirect(`${loginHref}?returnTo=${encodeURIComponent(`${basePath}${request.url}`)}`, 302);
    }

    /**
     * One user may have at most `limits.perUserConcurrency` proxied requests in
     * flight (a refresh they wait for included), so one user's slow or stalled
     * requests cannot take every pooled upstream connection (README "Limits
     * under abuse"; test/proxy/per-user-concurrency.test.ts). The slot is given
     * back when the response closes, finished or not, or once an event
     * stream's head is sent (`rewriteHeaders`).
     */
    function takeUserSlot(request: FastifyRequest, reply: FastifyReply): void {
      const exchange = request.exchange!;
      const count = inFlight.get(exchange.userKey) ?? 0;
      if (count >= perUserLimit) {
        reply.header('retry-after', '1');
        throw gatehouseError('GH_ERR_USER_CONCURRENCY');
      }
      inFlight.set(exchange.userKey, count + 1);
      exchange.holdsSlot = true;
      (reply.raw as SlotHolder)[SLOT_OWNER] = request;
      reply.raw.once('close', onResponseClosed);
    }

    function onResponseClosed(this: SlotHolder): void {
      const request = this[SLOT_OWNER];
      this[SLOT_OWNER] = undefined;
      if (request) releaseUserSlot(request);
    }

    function releaseUserSlot(request: FastifyRequest): void {
      const exchange = request.exchange!;
      if (!exchange.holdsSlot) return;
      exchange.holdsSlot = false;
      const count = (inFlight.get(exchange.userKey) ?? 1) - 1;
      if (count > 0) inFlight.set(exchange.userKey, count);
      else inFlight.delete(exchange.userKey);
    }

    /**
     * Sends the request to its route's upstream. `options` is the object
     * @fastify/http-proxy builds for this request (it does, as `getUpstream`
     * is given), so the route's timeout is set on it without another allocation.
     */
    function proxyTo(request: FastifyRequest, reply: FastifyReply, _dest: string, options: { timeout?: number }): FastifyReply {
      const exchange = request.exchange!;
      fromOptions ??= options;
      options.timeout = exchange.route.timeout * 1000;
      return reply.from(exchange.path, options as Parameters<FastifyReply['from']>[1]);
    }

    /**
     * The upstream refused a token the gateway believed fresh (revoked at the
     * AS, say): for a bodiless GET, HEAD or OPTIONS, refresh once and send the
     * request once more; the second answer, 401 or not, goes to the browser.
     * Other methods get the 401 as it is: their request may have had effects
     * and its body is already consumed.
     */
    function onResponse(request: FastifyRequest, reply: FastifyReply, res: UpstreamResponse): void {
      const exchange = request.exchange!;
      if (res.statusCode !== 401 || !exchange.retryable) {
        if (exchange.retried) {
          if (res.statusCode === 401) refusedAfterRetry.set(exchange.userKey, exchange.token);
          else refusedAfterRetry.delete(exchange.userKey);
        }
        reply.send(res.stream);
        return;
      }
      exchange.retryable = false;
      res.stream.destroy();
      // reply-from copied the refused response's headers onto the reply already.
      for (const name of Object.keys(res.headers)) reply.removeHeader(name);
      void retryWithNewToken(request, reply);
    }

    async function retryWithNewToken(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const exchange = request.exchange!;
      request.log.info({ userId: request.userId }, 'upstream refused the access token: replacing it');
      try {
        const tokens = await refresher.replace(exchange.userKey, exchange.token, request.log);
        exchange.token = tokens.accessToken;
        // A proof is good for one request (its jti): the retry gets its own.
        if (dpop) exchange.proof = await upstreamProof(request, exchange.route, tokens);
      } catch (err) {
        reply.send(err);
        return;
      }
      exchange.retried = true;
      exchange.startedAt = process.hrtime.bigint();
      const options = { ...(fromOptions as object), getUpstream: originOf, timeout: exchange.route.timeout * 1000 };
      reply.from(exchange.path, options as Parameters<FastifyReply['from']>[1]);
    }

    function replacedHeaders(request: FastifyRequest): (name: string) => boolean {
      const byAddress = clientAddressing.replacedHeaders(request);
      let replaced = replacedWith.get(byAddress);
      if (replaced === undefined) {
        replaced = (name) => byAddress(name) || isGatewaySet(name);
        replacedWith.set(byAddress, replaced);
      }
      return replaced;
    }

    function rewriteRequestHeaders(request: FastifyRequest, incoming: IncomingHttpHeaders): IncomingHttpHeaders {
      const exchange = request.exchange!;
      const headers = endToEndHeaders(incoming, replacedHeaders(request));
      const { identity } = exchange;
      if (identity !== undefined) Object.assign(headers, identity);
      // No token on a `token: none` route, nor without a user on an optional one.
      if (exchange.token !== '') {
        if (exchange.proof === '') {
          headers.authorization = `Bearer ${exchange.token}`;
        } else {
          // RFC 9449 §7.1: the DPoP scheme and a proof for this method and URL; a browser's own DPoP header never passes.
          headers.authorization = `DPoP ${exchange.token}`;
          headers.dpop = exchange.proof;
        }
      }
      headers['x-request-id'] = request.id;
      const cookie = incoming.cookie === undefined ? undefined : cookies.stripOwn(incoming.cookie);
      if (cookie !== undefined) headers.cookie = cookie;
      headers['x-forwarded-for'] = clientAddressing.forwardedFor(request);
      headers['x-forwarded-proto'] = site.proto;
      headers['x-forwarded-host'] = site.host;
      return headers;
    }

    function rewriteHeaders(incoming: IncomingHttpHeaders, request: FastifyRequest): OutgoingHttpHeaders {
      const exchange = request.exchange!;
      exchange.seconds = Number(process.hrtime.bigint() - exchange.startedAt) / 1e9;
      metrics.upstreamDuration.observe(exchange.seconds);
      const headers = endToEndHeaders(incoming);
      // A server-sent events stream may stay open for hours: it holds no slot once its head is sent.
      if (exchange.holdsSlot && isEventStream(headers['content-type'])) releaseUserSlot(request);
      const setCookie = headers['set-cookie'];
      if (setCookie !== undefined) headers['set-cookie'] = cookies.filterSetCookie(setCookie);
      return headers;
    }

    /**
     * The proof for the request about to go upstream: `htu` is the URL it is
     * sent to (the route's upstream, resolved as @fastify/reply-from
     * resolves it), not the public URL the browser used (README "Client
     * authentication and sender-constrained tokens", behind a gateway).
     */
    async function upstreamProof(request: FastifyRequest, route: Route, tokens: TokenRecord): Promise<string> {
      // A record from before `dpop` was turned on holds a Bearer token: sent as such until its refresh binds a key.
      if (tokens.dpopKey === undefined) return '';
      const source = request.exchange!.path;
      const target = new URL(source.length > 1 && source[1] === '/' ? `.${source}` : source, route.origin);
      return dpop!.proof(tokens.dpopKey, request.method, target, tokens.accessToken);
    }

    function onError(reply: FastifyReply, { error }: { error: Error & { statusCode?: number } }): void {
      // Host and path of the upstream request, never its query (README "Logs").
      const { request } = reply;
      const exchange = request.exchange!;
      const failure = { type: error.name, code: causeCode(error), endpoint: `${exchange.route.origin}${exchange.path}` };
      request.log.warn({ failure }, 'upstream failed');
      // reply-from's GatewayTimeoutError: no response head within the route's `timeout`.
      reply.send(gatehouseError(error.statusCode === 504 ? 'GH_ERR_UPSTREAM_TIMEOUT' : 'GH_ERR_UPSTREAM_UNAVAILABLE', { cause: error }));
    }

    // Fastify's own text/plain parser would buffer such bodies, and refuse any over
    // its 1 MiB bodyLimit with 413; @fastify/http-proxy streams every other type (README "How it works").
    fastify.removeContentTypeParser('text/plain');
    await fastify.register(httpProxy, {
      // No fixed upstream: each request goes to its route's origin (`getUpstream`).
      upstream: '',
      prefix: '/',
      preHandler: authenticate,
      handler: proxyTo,
      disableRequestLogging: true,
      // Only the matched route's upstream ever receives its token: nothing in a request chooses the host (README "Routes").
      undici: new UpstreamAgent({
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        // An https upstream must prove who it is.
        connect: { rejectUnauthorized: true },
      }),
      // reply-from retries a GET answered 503 up to 10 times (its `maxRetriesOn503` treats 0 as
      // unset), sleeping Retry-After as milliseconds: a handler that never asks for a retry
      // passes every answer on once (README "What the browser sees"; test/proxy/no-retry-on-503.test.ts).
      replyOptions: { rewriteRequestHeaders, rewriteHeaders, onError, onResponse, retryDelay: neverRetry, getUpstream: originOf },
    } as unknown as Parameters<typeof httpProxy>[1]);
  },
  { name: 'gatehouse-proxy', fastify: '5.x', dependencies: ['gatehouse-context', 'gatehouse-errors'] },
);

/** The origin of the request's route: the only host its request, and its token, goes to. */
function originOf(request: FastifyRequest): string {
  return request.exchange!.route.origin;
}

function isEventStream(contentType: OutgoingHttpHeaders[string]): boolean {
  return typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream');
}

/** @fastify/reply-from's retry hook: null means "do not retry", for 503s and network errors alike. */
function neverRetry(): null {
  return null;
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}
