import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { gatehouseError } from '../errors.js';
import { createCrossSiteCheck } from '../http/csrf.js';
import { resolveSession } from './session.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The access token to send upstream, set once the session is resolved. */
    upstreamToken: string;
    /** When the request was handed to the upstream (hrtime ns), for the latency histogram. */
    upstreamStart: bigint;
    /** Seconds the upstream took to answer with its head; -1 until it has. */
    upstreamSeconds: number;
    /** The signed-in user's id, for the access log. */
    userId: string | undefined;
  }
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) plus what this proxy consumes itself:
 * never forwarded in either direction. `expect` is answered by Node already.
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-authorization', 'expect'];

/** Deletes the hop-by-hop headers, those the Connection header names first (RFC 9110 §7.6.1). */
function deleteHopByHop(headers: IncomingHttpHeaders): void {
  const connection = headers.connection;
  if (connection !== undefined) {
    for (const name of connection.split(',')) delete headers[name.trim().toLowerCase()];
  }
  for (const name of HOP_BY_HOP) delete headers[name];
}

/**
 * Every path that is not the gateway's own goes to `upstream` with the
 * user's access token (SPEC §5). The preHandler is the hot path: CSRF check,
 * one cookie, LRU lookups, a refresh only when the token is stale.
 */
export const proxyPlugin = fp(
  async (fastify) => {
    const { config, cookies, refresher, metrics } = fastify.gatehouse;
    const isCrossSite = createCrossSiteCheck(config);
    const publicUrl = new URL(config.server.publicUrl);
    const forwardedProto = publicUrl.protocol.slice(0, -1);
    const forwardedHost = publicUrl.host;
    const trustProxy = config.server.trustProxy;

    fastify.decorateRequest('upstreamToken', '');
    fastify.decorateRequest('upstreamStart', 0n);
    fastify.decorateRequest('upstreamSeconds', -1);
    fastify.decorateRequest('userId', undefined);

    async function authenticate(request: FastifyRequest): Promise<void> {
      if (isCrossSite(request)) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      const resolved = await resolveSession(request);
      if (!resolved) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      request.userId = resolved.session.userId;
      const tokens = await refresher.fresh(resolved.tokens, request.log);
      request.upstreamToken = tokens.accessToken;
      request.upstreamStart = process.hrtime.bigint();
    }

    function rewriteRequestHeaders(request: FastifyRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders {
      deleteHopByHop(headers);
      headers.authorization = `Bearer ${request.upstreamToken}`;
      headers['x-request-id'] = request.id;
      const cookie = headers.cookie === undefined ? undefined : cookies.stripOwn(headers.cookie);
      if (cookie === undefined) delete headers.cookie;
      else headers.cookie = cookie;
      const priorFor = trustProxy ? headers['x-forwarded-for'] : undefined;
      if (!trustProxy) {
        for (const name of Object.keys(headers)) {
          if (name.startsWith('x-forwarded-') || name === 'forwarded') delete headers[name];
        }
      }
      const clientIp = request.socket.remoteAddress ?? '';
      headers['x-forwarded-for'] = priorFor ? `${priorFor}, ${clientIp}` : clientIp;
      headers['x-forwarded-proto'] = forwardedProto;
      headers['x-forwarded-host'] = forwardedHost;
      return headers;
    }

    function rewriteHeaders(headers: IncomingHttpHeaders, request: FastifyRequest): OutgoingHttpHeaders {
      request.upstreamSeconds = Number(process.hrtime.bigint() - request.upstreamStart) / 1e9;
      metrics.upstreamDuration.observe(request.upstreamSeconds);
      deleteHopByHop(headers);
      const setCookie = headers['set-cookie'];
      if (setCookie !== undefined) headers['set-cookie'] = cookies.filterSetCookie(setCookie);
      return headers;
    }

    function onError(reply: FastifyReply, { error }: { error: Error }): void {
      reply.request.log.warn({ failure: { type: error.name, code: (error as { code?: string }).code } }, 'upstream failed');
      reply.send(gatehouseError('GH_ERR_UPSTREAM_UNAVAILABLE', { cause: error }));
    }

    // Fastify's own text/plain parser would buffer such bodies, and refuse any over
    // its 1 MiB bodyLimit with 413; @fastify/http-proxy streams every other type (SPEC §5).
    fastify.removeContentTypeParser('text/plain');
    await fastify.register(httpProxy, {
      upstream: config.upstream,
      prefix: '/',
      config: { routeClass: 'proxy' },
      preHandler: authenticate,
      disableRequestLogging: true,
      // Only the configured upstream ever receives a token: nothing in a request chooses the host (SPEC §5).
      undici: {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        // @fastify/reply-from turns certificate checks off unless told: an https upstream must prove who it is.
        tls: { rejectUnauthorized: true },
      },
      replyOptions: { rewriteRequestHeaders, rewriteHeaders, onError },
    } as unknown as Parameters<typeof httpProxy>[1]);
  },
  { name: 'gatehouse-proxy', fastify: '5.x', dependencies: ['gatehouse-context', 'gatehouse-errors'] },
);
