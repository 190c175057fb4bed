import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { Agent, type Dispatcher } from 'undici';
import { gatehouseError } from '../errors.js';
import { causeCode } from '../failure.js';
import { endToEndHeaders } from '../http/hop-by-hop.js';
import { UpstreamHeaders, upstreamProof, upstreamUrl } from '../access/upstream-identity.js';
import { createAuthenticate } from './authenticate.js';
import { UserSlots } from './user-slots.js';
import { hasBody, isNavigation } from '../http/request-kind.js';
import { INSUFFICIENT_USER_AUTHENTICATION, meetsStepUp, upstreamStepUp as readUpstreamStepUp } from '../oauth/step-up.js';
import { sendStepUp, stepUpRefusal } from '../access/step-up.js';

/** The part of @fastify/reply-from's upstream response that `onResponse` reads. */
interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  stream: Readable;
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
export const proxyPlugin = fp<{ gatewayPaths: ReadonlySet<string> }>(
  async (fastify, { gatewayPaths }) => {
    const context = fastify.gatehouse;
    const { config, cookies, refresher, targetTokens, metrics, providers, clientAddressing, clock, errorResponse, links } = context;
    const upstreamHeaders = new UpstreamHeaders(context);
    const slots = new UserSlots(config.limits.perUserConcurrency);
    /**
     * userId -> the access token that the upstream refused even right after
     * a replacement: a path that answers 401 whatever the token must not
     * cost a refresh on every request. Cleared once the user has another token.
     */
    const refusedAfterRetry = new LRUCache<string, string>({ max: config.session.cacheSize });
    const authenticate = createAuthenticate(context, slots, refusedAfterRetry, gatewayPaths);
    /** @fastify/http-proxy's reply options (the same object for every request), kept for the retry. */
    let fromOptions: unknown;

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
      if (res.statusCode === 401 && exchange.session !== null && isStepUpChallenge(res.headers['www-authenticate'])) {
        upstreamStepUp(request, reply, res);
        return;
      }
      // RFC 9449 §9: a resource server hands out nonces in DPoP-Nonce, on a use_dpop_nonce 401 or any other answer.
      if (exchange.proof !== '' && res.headers['dpop-nonce'] !== undefined && takeNonce(request, reply, res)) return;
      if (res.statusCode === 401 && exchange.proof !== '' && isNonceChallenge(res.headers['www-authenticate'])) {
        // A nonce refused again, or one the request could not be sent again with: to the client as it is, never a refresh.
        reply.send(res.stream);
        return;
      }
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

    /**
     * The upstream asked for a stronger or more recent sign-in (RFC 9470 §3,
     * README "Step-up"). A GET or HEAD navigation whose session does not
     * meet what it names is sent through that sign-in and back instead of
     * seeing the 401; everything else (an API call, a session that meets it
     * already, so no loop) gets the upstream's 401 as it is. Never a token
     * refresh: a new access token for the same sign-in would not help.
     */
    function upstreamStepUp(request: FastifyRequest, reply: FastifyReply, res: UpstreamResponse): void {
      const exchange = request.exchange!;
      const requirement = (request.method === 'GET' || request.method === 'HEAD') && isNavigation(request) ? readUpstreamStepUp(res.headers['www-authenticate']) : undefined;
      if (requirement === undefined || meetsStepUp(requirement, exchange.session!, clock.now())) {
        reply.send(res.stream);
        return;
      }
      res.stream.destroy();
      for (const name of Object.keys(res.headers)) reply.removeHeader(name);
      request.log.info({ userId: request.userId }, 'upstream asked for a step-up');
      sendStepUp(request, reply, errorResponse, stepUpRefusal(links, requirement, `${links.basePath}${request.url}`), 'redirect');
    }

    /**
     * Keeps the upstream's DPoP nonce for its origin (src/oauth/dpop.ts);
     * when it came with a `use_dpop_nonce` 401, sends the request once more
     * with a proof carrying it (true: the 401 is not passed on). The same
     * token: a nonce is not a token problem, so no refresh. Only a request
     * without a body is sent again (its body was streamed upstream and is
     * gone; nothing is buffered); one with a body gets the 401 as it is, and
     * the next request to that origin carries the nonce from the start. A
     * second nonce 401 goes to the client (README "DPoP").
     */
    function takeNonce(request: FastifyRequest, reply: FastifyReply, res: UpstreamResponse): boolean {
      const exchange = request.exchange!;
      const nonce = res.headers['dpop-nonce'];
      if (typeof nonce !== 'string' || exchange.dpopKeys === undefined || !exchange.dpopKeys.rememberNonce(upstreamUrl(exchange.route, '/').origin, nonce)) return false;
      if (res.statusCode !== 401 || exchange.nonceRetried || hasBody(request) || !isNonceChallenge(res.headers['www-authenticate'])) return false;
      exchange.nonceRetried = true;
      res.stream.destroy();
      // reply-from copied the refused response's headers onto the reply already.
      for (const name of Object.keys(res.headers)) reply.removeHeader(name);
      void retryWithNonce(request, reply);
      return true;
    }

    async function retryWithNonce(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const exchange = request.exchange!;
      request.log.info({ userId: request.userId, endpoint: exchange.route.origin }, 'upstream asked for a DPoP nonce: sending the request once more with it');
      try {
        // A proof is good for one request (its jti): the retry gets its own, with the origin's nonce now cached.
        exchange.proof = exchange.dpopKeys!.proof(exchange.dpopKey!, request.method, upstreamUrl(exchange.route, exchange.path), exchange.token);
      } catch (err) {
        reply.send(err);
        return;
      }
      sendAgain(request, reply);
    }

    /** Sends the request to its upstream once more (a retry), with the exchange's token and proof as they are now. */
    function sendAgain(request: FastifyRequest, reply: FastifyReply): void {
      const exchange = request.exchange!;
      exchange.startedAt = process.hrtime.bigint();
      const options = { ...(fromOptions as object), getUpstream: originOf, timeout: exchange.route.timeout * 1000 };
      reply.from(exchange.path, options as Parameters<FastifyReply['from']>[1]);
    }

    async function retryWithNewToken(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const exchange = request.exchange!;
      request.log.info({ userId: request.userId }, 'upstream refused the access token: replacing it');
      try {
        const target = exchange.route.target;
        if (target === undefined) {
          const tokens = await refresher.replace(exchange.userKey, exchange.token, request.log);
          exchange.token = tokens.accessToken;
          // A proof is good for one request (its jti): the retry gets its own.
          if (providers.dpop) {
            exchange.proof = upstreamProof(providers, tokens, request.method, upstreamUrl(exchange.route, exchange.path));
            exchange.dpopKey = tokens.dpopKey;
            exchange.dpopKeys = providers.get(tokens.provider)?.dpop;
          }
        } else {
          // The route's own token was refused: a new one for its target, the sign-in token untouched.
          const grant = await targetTokens.replace(exchange.userKey, target, exchange.token, request.log);
          exchange.token = grant.token.accessToken;
          if (providers.dpop) {
            exchange.proof = upstreamProof(providers, grant.record, request.method, upstreamUrl(exchange.route, exchange.path), grant.token);
            exchange.dpopKey = grant.record.dpopKey;
            exchange.dpopKeys = providers.get(grant.record.provider)?.dpop;
          }
        }
      } catch (err) {
        reply.send(err);
        return;
      }
      exchange.retried = true;
      sendAgain(request, reply);
    }

    /** What the upstream receives (src/access/upstream-identity.ts): the same rules as an upgrade's handshake. */
    function rewriteRequestHeaders(request: FastifyRequest, incoming: IncomingHttpHeaders): IncomingHttpHeaders {
      return upstreamHeaders.forUpstream(incoming, request.socket.remoteAddress ?? '', clientAddressing.forwardedFor(request), request.id, request.exchange!, request.site);
    }

    function rewriteHeaders(incoming: IncomingHttpHeaders, request: FastifyRequest): OutgoingHttpHeaders {
      const exchange = request.exchange!;
      exchange.seconds = Number(process.hrtime.bigint() - exchange.startedAt) / 1e9;
      metrics.upstreamDuration.observe(exchange.seconds);
      const headers = endToEndHeaders(incoming);
      // A server-sent events stream may stay open for hours: it holds no slot once its head is sent.
      if (exchange.holdsSlot && isEventStream(headers['content-type'])) slots.release(request);
      const setCookie = headers['set-cookie'];
      if (setCookie !== undefined) headers['set-cookie'] = cookies.filterSetCookie(setCookie);
      return headers;
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
        // No fixed pool by default: stalled clients of a few users would fill it and queue everyone else (README "Limits under abuse").
        connections: config.limits.upstreamConnections === 0 ? null : config.limits.upstreamConnections,
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
  { name: 'gatehouse-proxy', fastify: '5.x', dependencies: ['gatehouse-context', 'gatehouse-errors', 'gatehouse-request-state'] },
);

/** The origin of the request's route: the only host its request, and its token, goes to. */
function originOf(request: FastifyRequest): string {
  return request.exchange!.route.origin;
}

/** RFC 9449 §9's challenge: the DPoP scheme with `error="use_dpop_nonce"`. */
const NONCE_CHALLENGE = /(?:^|,)\s*DPoP\s[^]*?\berror\s*=\s*"?use_dpop_nonce\b/i;

function isNonceChallenge(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  return Array.isArray(header) ? header.some((value) => NONCE_CHALLENGE.test(value)) : NONCE_CHALLENGE.test(header);
}

/** Whether a `WWW-Authenticate` names RFC 9470's error at all (the cheap test before reading it). */
function isStepUpChallenge(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  return Array.isArray(header) ? header.some((value) => value.includes(INSUFFICIENT_USER_AUTHENTICATION)) : header.includes(INSUFFICIENT_USER_AUTHENTICATION);
}

function isEventStream(contentType: OutgoingHttpHeaders[string]): boolean {
  return typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream');
}

/** @fastify/reply-from's retry hook: null means "do not retry", for 503s and network errors alike. */
function neverRetry(): null {
  return null;
}
