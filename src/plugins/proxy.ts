import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { gatehouseError } from '../errors.js';
import { createCrossSiteCheck } from '../http/csrf.js';
import { endToEndHeaders } from '../http/hop-by-hop.js';
import { ClientAddressing } from '../http/client-address.js';
import { resolveSession } from './session.js';
import { causeCode, endpointOf } from '../oauth/provider.js';
import type { TokenRecord } from '../session/store.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The access token to send upstream, set once the session is resolved. */
    upstreamToken: string;
    /** With `provider.dpop`: the DPoP proof sent with it (RFC 9449 §7.1); '' otherwise. */
    upstreamProof: string;
    /** When the request was handed to the upstream (hrtime ns), for the latency histogram. */
    upstreamStart: bigint;
    /** Seconds the upstream took to answer with its head; -1 until it has. */
    upstreamSeconds: number;
    /** The signed-in user as shown (the `userIdClaim` value), for the access log. */
    userId: string | undefined;
    /** The key of the signed-in user's token record (src/oauth/identify.ts). */
    userKey: string;
    /** Whether an upstream 401 may be retried once with a new access token (see `onResponse`). */
    upstreamRetryable: boolean;
    /** The upstream path and query, kept for that retry. */
    upstreamPath: string;
    /** Whether this request is that retry. */
    upstreamRetried: boolean;
    /** Whether this request counts toward its user's `limits.perUserConcurrency`. */
    holdsUserSlot: boolean;
  }
}

/** The request whose per-user slot a response gives back when it closes (no closure per request on the hot path). */
const SLOT_OWNER = Symbol('gatehouse.slotOwner');
type SlotHolder = ServerResponse & { [SLOT_OWNER]?: FastifyRequest };

/** Methods whose request, without a body, can be sent twice: safe and bodiless (RFC 9110 §9.2.1). */
const RETRYABLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The part of @fastify/reply-from's upstream response that `onResponse` reads. */
interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  stream: Readable;
}

/**
 * Every path that is not the gateway's own goes to `upstream` with the
 * user's access token (README "How it works"). The preHandler is the hot path: CSRF check,
 * one cookie, LRU lookups, a refresh only when the token is stale.
 */
export const proxyPlugin = fp(
  async (fastify) => {
    const { config, cookies, refresher, metrics, dpop } = fastify.gatehouse;
    const isCrossSite = createCrossSiteCheck(config);
    const publicUrl = new URL(config.server.publicUrl);
    const forwardedProto = publicUrl.protocol.slice(0, -1);
    const forwardedHost = publicUrl.host;
    const clientAddressing = new ClientAddressing(config.server.trustProxy);

    fastify.decorateRequest('upstreamToken', '');
    fastify.decorateRequest('upstreamProof', '');
    fastify.decorateRequest('upstreamStart', 0n);
    fastify.decorateRequest('upstreamSeconds', -1);
    fastify.decorateRequest('userId', undefined);
    fastify.decorateRequest('userKey', '');
    fastify.decorateRequest('upstreamRetryable', false);
    fastify.decorateRequest('upstreamPath', '');
    fastify.decorateRequest('upstreamRetried', false);
    fastify.decorateRequest('holdsUserSlot', false);
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

    async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      if (isCrossSite(request)) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      const resolved = await resolveSession(request);
      if (!resolved) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      request.userKey = resolved.session.userId;
      request.userId = resolved.tokens.user ?? resolved.session.userId;
      if (perUserLimit > 0) takeUserSlot(request, reply);
      const tokens = await refresher.fresh(resolved.tokens, request.log);
      request.upstreamToken = tokens.accessToken;
      if (dpop) request.upstreamProof = await upstreamProof(request, tokens);
      // A token issued during this very request is not worth replacing if the upstream refuses it.
      request.upstreamRetryable =
        tokens === resolved.tokens && RETRYABLE_METHODS.has(request.method) && !hasBody(request) && refusedAfterRetry.peek(request.userKey) !== tokens.accessToken;
      request.upstreamStart = process.hrtime.bigint();
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
      const count = inFlight.get(request.userKey) ?? 0;
      if (count >= perUserLimit) {
        reply.header('retry-after', '1');
        throw gatehouseError('GH_ERR_USER_CONCURRENCY');
      }
      inFlight.set(request.userKey, count + 1);
      request.holdsUserSlot = true;
      (reply.raw as SlotHolder)[SLOT_OWNER] = request;
      reply.raw.once('close', onResponseClosed);
    }

    function onResponseClosed(this: SlotHolder): void {
      const request = this[SLOT_OWNER];
      this[SLOT_OWNER] = undefined;
      if (request) releaseUserSlot(request);
    }

    function releaseUserSlot(request: FastifyRequest): void {
      if (!request.holdsUserSlot) return;
      request.holdsUserSlot = false;
      const count = (inFlight.get(request.userKey) ?? 1) - 1;
      if (count > 0) inFlight.set(request.userKey, count);
      else inFlight.delete(request.userKey);
    }

    function proxyTo(request: FastifyRequest, reply: FastifyReply, dest: string, options: unknown): FastifyReply {
      request.upstreamPath = dest;
      fromOptions ??= options;
      return reply.from(dest, options as Parameters<FastifyReply['from']>[1]);
    }

    /**
     * The upstream refused a token the gateway believed fresh (revoked at the
     * AS, say): for a bodiless GET, HEAD or OPTIONS, refresh once and send the
     * request once more; the second answer, 401 or not, goes to the browser.
     * Other methods get the 401 as it is: their request may have had effects
     * and its body is already consumed.
     */
    function onResponse(request: FastifyRequest, reply: FastifyReply, res: UpstreamResponse): void {
      if (res.statusCode !== 401 || !request.upstreamRetryable) {
        if (request.upstreamRetried) {
          if (res.statusCode === 401) refusedAfterRetry.set(request.userKey, request.upstreamToken);
          else refusedAfterRetry.delete(request.userKey);
        }
        reply.send(res.stream);
        return;
      }
      request.upstreamRetryable = false;
      res.stream.destroy();
      // reply-from copied the refused response's headers onto the reply already.
      for (const name of Object.keys(res.headers)) reply.removeHeader(name);
      void retryWithNewToken(request, reply);
    }

    async function retryWithNewToken(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      request.log.info({ userId: request.userId }, 'upstream refused the access token: replacing it');
      try {
        const tokens = await refresher.replace(request.userKey, request.upstreamToken, request.log);
        request.upstreamToken = tokens.accessToken;
        // A proof is good for one request (its jti): the retry gets its own.
        if (dpop) request.upstreamProof = await upstreamProof(request, tokens);
      } catch (err) {
        reply.send(err);
        return;
      }
      request.upstreamRetried = true;
      request.upstreamStart = process.hrtime.bigint();
      reply.from(request.upstreamPath, fromOptions as Parameters<FastifyReply['from']>[1]);
    }

    function rewriteRequestHeaders(request: FastifyRequest, incoming: IncomingHttpHeaders): IncomingHttpHeaders {
      const headers = endToEndHeaders(incoming, clientAddressing.replacedHeaders(request));
      if (request.upstreamProof === '') {
        headers.authorization = `Bearer ${request.upstreamToken}`;
      } else {
        // RFC 9449 §7.1: the DPoP scheme and a proof for this method and URL; a browser's own DPoP header never passes.
        headers.authorization = `DPoP ${request.upstreamToken}`;
        headers.dpop = request.upstreamProof;
      }
      headers['x-request-id'] = request.id;
      const cookie = incoming.cookie === undefined ? undefined : cookies.stripOwn(incoming.cookie);
      if (cookie !== undefined) headers.cookie = cookie;
      headers['x-forwarded-for'] = clientAddressing.forwardedFor(request);
      headers['x-forwarded-proto'] = forwardedProto;
      headers['x-forwarded-host'] = forwardedHost;
      return headers;
    }

    function rewriteHeaders(incoming: IncomingHttpHeaders, request: FastifyRequest): OutgoingHttpHeaders {
      request.upstreamSeconds = Number(process.hrtime.bigint() - request.upstreamStart) / 1e9;
      metrics.upstreamDuration.observe(request.upstreamSeconds);
      const headers = endToEndHeaders(incoming);
      // A server-sent events stream may stay open for hours: it holds no slot once its head is sent.
      if (request.holdsUserSlot && isEventStream(headers['content-type'])) releaseUserSlot(request);
      const setCookie = headers['set-cookie'];
      if (setCookie !== undefined) headers['set-cookie'] = cookies.filterSetCookie(setCookie);
      return headers;
    }

    const upstreamEndpoint = endpointOf(config.upstream).replace(/\/$/, '');

    /**
     * The proof for the request about to go upstream: `htu` is the URL it is
     * sent to (the configured upstream, resolved as @fastify/reply-from
     * resolves it), not the public URL the browser used (README "Client
     * authentication and sender-constrained tokens", behind a gateway).
     */
    async function upstreamProof(request: FastifyRequest, tokens: TokenRecord): Promise<string> {
      // A record from before `dpop` was turned on holds a Bearer token: sent as such until its refresh binds a key.
      if (tokens.dpopKey === undefined) return '';
      const source = request.url;
      const target = new URL(source.length > 1 && source[1] === '/' ? `.${source}` : source, config.upstream);
      return dpop!.proof(tokens.dpopKey, request.method, target, tokens.accessToken);
    }

    function onError(reply: FastifyReply, { error }: { error: Error }): void {
      // Host and path of the upstream request, never its query (README "Logs").
      const { url } = reply.request;
      const query = url.indexOf('?');
      const failure = { type: error.name, code: causeCode(error), endpoint: `${upstreamEndpoint}${query < 0 ? url : url.slice(0, query)}` };
      reply.request.log.warn({ failure }, 'upstream failed');
      reply.send(gatehouseError('GH_ERR_UPSTREAM_UNAVAILABLE', { cause: error }));
    }

    // Fastify's own text/plain parser would buffer such bodies, and refuse any over
    // its 1 MiB bodyLimit with 413; @fastify/http-proxy streams every other type (README "How it works").
    fastify.removeContentTypeParser('text/plain');
    await fastify.register(httpProxy, {
      upstream: config.upstream,
      prefix: '/',
      config: { routeClass: 'proxy' },
      preHandler: authenticate,
      handler: proxyTo,
      disableRequestLogging: true,
      // Only the configured upstream ever receives a token: nothing in a request chooses the host (README "How it works").
      undici: {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        // @fastify/reply-from turns certificate checks off unless told: an https upstream must prove who it is.
        tls: { rejectUnauthorized: true },
      },
      // reply-from retries a GET answered 503 up to 10 times (its `maxRetriesOn503` treats 0 as
      // unset), sleeping Retry-After as milliseconds: a handler that never asks for a retry
      // passes every answer on once (README "What the browser sees"; test/proxy/no-retry-on-503.test.ts).
      replyOptions: { rewriteRequestHeaders, rewriteHeaders, onError, onResponse, retryDelay: neverRetry },
    } as unknown as Parameters<typeof httpProxy>[1]);
  },
  { name: 'gatehouse-proxy', fastify: '5.x', dependencies: ['gatehouse-context', 'gatehouse-errors'] },
);

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
