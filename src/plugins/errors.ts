import fp from 'fastify-plugin';
import type { FastifyError } from 'fastify';
import { gatehouseError, isGatehouseError, type GatehouseError } from '../errors.js';
import { causeCode } from '../failure.js';
import { normalPath } from '../http/request-path.js';
import { storeEndpoint } from '../config/store-url.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The registry code of a refused request (below 500), carried by its one access-log line. */
    errorCode: ErrorCode | undefined;
  }
}
type ErrorCode = GatehouseError['code'];

/**
 * Replaces Fastify's error and not-found handlers. Every error becomes a
 * registry error: below 500 its own sentence, at 500 and above a generic one
 * with the full error only in the log (never echoed). Each is answered by
 * the one renderer, src/http/error-response.ts (Fastify's own bad-URL
 * answer goes there too: src/app.ts `frameworkErrors`).
 */
export const errorsPlugin = fp(
  async (fastify) => {
    const { config, errorResponse } = fastify.gatehouse;
    const storeAt = storeEndpoint(config.session.store);
    fastify.decorateRequest('errorCode', undefined);
    fastify.setErrorHandler((error: FastifyError, request, reply) => {
      const known = toGatehouseError(error);
      // A refusal (401, 403, 400...) is an everyday event: its code goes on the request's one access-log line.
      if (known.statusCode < 500) request.errorCode = known.code;
      else if (known.code === 'GH_ERR_STORE_UNAVAILABLE') {
        request.log.error({ code: known.code, failure: { code: causeCode(known.cause) ?? causeName(known.cause), endpoint: storeAt } }, 'store unavailable');
      } else request.log.error({ err: error, code: known.code }, 'request failed');
      return errorResponse.send(request, reply, known);
    });
    // Every other path is proxied, so a request lands here only on a gateway path with another method, or, with
    // forwardAuth.only, on a path that is not the gateway's.
    const gatewayPaths = new Set(Object.values(config.paths));
    fastify.setNotFoundHandler((request, reply) => {
      const query = request.url.indexOf('?');
      const normal = normalPath(query < 0 ? request.url : request.url.slice(0, query));
      const code = normal.ok && gatewayPaths.has(normal.match) ? 'GH_ERR_METHOD_NOT_ALLOWED' : 'GH_ERR_ROUTE_NOT_FOUND';
      request.errorCode = code;
      return errorResponse.send(request, reply, gatehouseError(code));
    });
  },
  { name: 'gatehouse-errors', fastify: '5.x', dependencies: ['gatehouse-context'] },
);


function causeName(cause: unknown): string | undefined {
  return cause instanceof Error ? cause.name : undefined;
}

/** Fastify's own errors (and anything unexpected) as registry errors; a Fastify 4xx keeps its status, never its message. */
export function toGatehouseError(error: FastifyError): GatehouseError {
  if (isGatehouseError(error)) return error;
  const status = error.statusCode ?? 500;
  if (status === 431) return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'headers too large', status: 431 });
  if (error instanceof URIError || error.code === 'FST_ERR_BAD_URL') {
    return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'invalid percent-encoding in the URL' });
  }
  if (status >= 400 && status < 500) {
    return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'it cannot be processed', status });
  }
  return gatehouseError('GH_ERR_INTERNAL', { cause: error });
}
