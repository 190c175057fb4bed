import fp from 'fastify-plugin';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { errorRow, gatehouseError, isGatehouseError, type ErrorCode, type GatehouseError } from '../errors.js';
import { isNavigation } from '../http/request-kind.js';
import { causeCode } from '../oauth/provider.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The registry code of a refused request (below 500), carried by its one access-log line. */
    errorCode: ErrorCode | undefined;
  }
}

/**
 * Replaces Fastify's error and not-found handlers. Every error becomes a
 * registry error: below 500 its own sentence, at 500 and above a generic one
 * with the full error only in the log (never echoed). Navigations get an HTML
 * page, API calls JSON. A 401 clears a session cookie the browser sent.
 */
export const errorsPlugin = fp(
  async (fastify) => {
    const storeEndpoint = withoutCredentials(fastify.gatehouse.config.session.store);
    fastify.decorateRequest('errorCode', undefined);
    fastify.setErrorHandler((error: FastifyError, request, reply) => {
      const known = toGatehouseError(error);
      // A refusal (401, 403, 400...) is an everyday event: its code goes on the request's one access-log line.
      if (known.statusCode < 500) request.errorCode = known.code;
      else if (known.code === 'GH_ERR_STORE_UNAVAILABLE') {
        request.log.error({ code: known.code, failure: { code: causeCode(known.cause) ?? causeName(known.cause), endpoint: storeEndpoint } }, 'store unavailable');
      } else request.log.error({ err: error, code: known.code }, 'request failed');
      return sendError(request, reply, known);
    });
    // Every other path is proxied, so a request lands here only on a gateway path with another method, or, with
    // forwardAuth.only, on a path that is not the gateway's.
    const gatewayPaths = new Set(Object.values(fastify.gatehouse.config.paths));
    fastify.setNotFoundHandler((request, reply) => {
      const query = request.url.indexOf('?');
      const path = query < 0 ? request.url : request.url.slice(0, query);
      return sendError(request, reply, gatehouseError(gatewayPaths.has(path) ? 'GH_ERR_METHOD_NOT_ALLOWED' : 'GH_ERR_ROUTE_NOT_FOUND'));
    });
  },
  { name: 'gatehouse-errors', fastify: '5.x', dependencies: ['gatehouse-context'] },
);

/** `redis://user:secret@host:6379/0?x` -> `redis://host:6379/0`: where the store is, never its password. */
function withoutCredentials(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//').replace(/[?#].*$/, '');
}

function causeName(cause: unknown): string | undefined {
  return cause instanceof Error ? cause.message.startsWith('the store did not answer') ? 'TIMEOUT' : cause.name : undefined;
}

function toGatehouseError(error: FastifyError): GatehouseError {
  if (isGatehouseError(error)) return error;
  const status = error.statusCode ?? 500;
  if (status === 431) return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'headers too large', status: 431 });
  if (error instanceof URIError) return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'invalid percent-encoding in the URL' });
  if (status >= 400 && status < 500) {
    return gatehouseError('GH_ERR_REQUEST_INVALID', { cause: error, detail: 'it cannot be processed', status });
  }
  return gatehouseError('GH_ERR_INTERNAL', { cause: error });
}

/**
 * Answers with a registry error as HTML (navigations) or JSON (API calls),
 * uncacheable. Also used by routes that answer an error without throwing.
 */
export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  error: GatehouseError,
  link?: { href: string; text: string },
  format: 'by-request' | 'json' = 'by-request',
): FastifyReply {
  const { cookies, basePath, config, pages } = request.server.gatehouse;
  if (error.code === 'GH_ERR_SESSION_REQUIRED' && request.cookies[cookies.sessionName] !== undefined) cookies.clearSession(reply);
  const row = errorRow(error.code);
  reply.code(error.statusCode).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff');
  if (format === 'by-request' && isNavigation(request)) {
    const signIn = link ?? (error.code === 'GH_ERR_SESSION_REQUIRED' ? signInLink(request, basePath, config.paths.login) : undefined);
    return reply
      .header('content-security-policy', pages.securityPolicy)
      .type('text/html; charset=utf-8')
      .send(pages.render({ page: row.page ?? 'refused', title: row.title, message: error.message, action: signIn, status: error.statusCode }));
  }
  const slug = row.slug;
  if (row.bare) return reply.type('application/json; charset=utf-8').send({ error: slug });
  return reply.type('application/json; charset=utf-8').send({ error: slug, message: error.message, ...(link ? { login: link.href } : {}) });
}

export function signInLink(request: FastifyRequest, basePath: string, loginPath: string): { href: string; text: string } {
  const returnTo = request.method === 'GET' ? `${basePath}${request.url}` : `${basePath}/`;
  return { href: `${basePath}${loginPath}?returnTo=${encodeURIComponent(returnTo)}`, text: 'Sign in' };
}
