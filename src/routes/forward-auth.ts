import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorRow, gatehouseError, isGatehouseError, type ErrorCode } from '../errors.js';
import { AddressList } from '../http/address-list.js';
import { isNavigation } from '../http/request-kind.js';
import { originalRequest } from '../http/original-request.js';
import { safeReturnTo } from '../oauth/return-to.js';
import { resolveSession } from '../session/resolve.js';
import { admitFresh, type Admission } from '../routing/route-access.js';
import type { Route } from '../routing/route-table.js';
import { isAmbiguousPath } from '../config/route-paths.js';

/** Methods a forward-auth request may come with: proxies ask with GET, or with the original method (nginx, Envoy). */
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * `paths.forwardAuth` (README "Behind nginx, Caddy, Traefik or Envoy"): a
 * reverse proxy that keeps routing asks whether the original request may
 * pass and as whom. Exists only with `forwardAuth.trustedProxies`, and
 * answers 404 to every other source, so a browser never reads a token
 * from it. 200 carries `Authorization: Bearer` and the route's identity
 * headers for the proxy to copy upstream; no other status ever carries a
 * token. Sessions are resolved and refreshed as for proxied requests
 * (src/session/resolve.ts, src/oauth/refresh.ts: one refresh per user).
 */
export async function forwardAuthRoute(fastify: FastifyInstance): Promise<void> {
  const { config, routes, cookies, basePath } = fastify.gatehouse;
  const { trustedProxies, redirect } = config.forwardAuth;
  if (trustedProxies === undefined) return;
  const proxies = new AddressList(trustedProxies);
  const isCrossSite = fastify.gatehouse.crossSite;
  const loginUrl = `${fastify.gatehouse.site.origin}${basePath}${config.paths.login}`;

  const endpoint = config.paths.forwardAuth;
  // Envoy's ext_authz asks at `path_prefix` + the original path: the whole subtree is the endpoint's.
  for (const url of [endpoint, `${endpoint}/*`]) {
    fastify.route({
      method: METHODS,
      url,
      config: { routeClass: 'forward-auth' },
      // Before any body is read: the endpoint does not exist for anyone but the proxies.
      onRequest: async (request) => {
        if (!proxies.has(request.socket.remoteAddress)) throw gatehouseError('GH_ERR_ROUTE_NOT_FOUND');
      },
      handler: async (request, reply) => {
        reply.header('cache-control', 'no-store');
        const original = originalRequest(request.headers, request.method, suffixOf(request.url, endpoint));
        if (original === undefined) {
          return refuse(request, reply, 'GH_ERR_REQUEST_INVALID', 'the proxy sent neither X-Forwarded-Uri nor X-Original-URL with a path');
        }
        // `/public/../admin` could match one route here and be another path at the upstream.
        if (isAmbiguousPath(original.path)) return refuse(request, reply, 'GH_ERR_REQUEST_INVALID', 'the path has dot segments or backslashes');
        const route = routes.match(original.path);
        if (route === undefined) return refuse(request, reply, 'GH_ERR_ROUTE_NOT_FOUND');
        if (route.auth === 'public') return reply.code(200).send();
        // The CSRF rule applies to every request that would go upstream with a session (README "Routes").
        if (route.auth === 'required' && isCrossSite(original.method, request.headers)) return refuse(request, reply, 'GH_ERR_CSRF_REJECTED');

        let admission: Admission | null = null;
        try {
          const resolved = await resolveSession(request);
          if (resolved !== null && route.auth === 'optional' && isCrossSite(original.method, request.headers)) return refuse(request, reply, 'GH_ERR_CSRF_REJECTED');
          if (resolved !== null) admission = await admitFresh(fastify.gatehouse, route, resolved, request.log);
        } catch (err) {
          // A refresh the AS rejected has ended the user's sessions: from here on the browser is signed out.
          if (!(isGatehouseError(err) && err.code === 'GH_ERR_SESSION_REQUIRED')) throw err;
        }

        if (admission === null) {
          if (request.cookies[cookies.sessionName] !== undefined) cookies.clearSession(reply);
          if (route.auth === 'optional') return reply.code(200).send();
          if (redirect && (original.method === 'GET' || original.method === 'HEAD') && isNavigation(request)) {
            // publicUrl, never the proxy's X-Forwarded-Host: a foreign host never becomes a redirect target (README "What the browser sees").
            return reply.redirect(`${loginUrl}?returnTo=${encodeURIComponent(safeReturnTo(original.url))}`, 302);
          }
          return refuse(request, reply, 'GH_ERR_SESSION_REQUIRED');
        }
        request.userId = admission.user;
        if (!admission.allowed) return refuse(request, reply, 'GH_ERR_NOT_ALLOWED', admission.user);
        return reply.code(200).headers(passHeaders(route, admission)).send();
      },
    });
  }
}

/** `/api/x?y` of `/forward-auth/api/x?y`; undefined for the endpoint itself. */
function suffixOf(url: string, endpoint: string): string | undefined {
  return url.length > endpoint.length && url[endpoint.length] === '/' ? url.slice(endpoint.length) : undefined;
}

/** The route's identity headers and, unless it is `token: none`, the fresh access token: for the proxy to copy upstream. */
function passHeaders(route: Route, admission: Admission): Record<string, string> {
  const headers: Record<string, string> = { ...admission.identity };
  if (route.sendsToken) headers.authorization = `Bearer ${admission.tokens.accessToken}`;
  return headers;
}

/**
 * A refusal as JSON whatever the request's Accept: the proxy, not a page,
 * reads it (nginx only its status; Caddy and Traefik pass it on).
 */
function refuse(request: FastifyRequest, reply: FastifyReply, code: ErrorCode, detail?: string): FastifyReply {
  const error = gatehouseError(code, detail === undefined ? {} : { detail });
  const row = errorRow(code);
  request.errorCode = code;
  return reply
    .code(error.statusCode)
    .type('application/json; charset=utf-8')
    .send(row.bare ? { error: row.slug } : { error: row.slug, message: error.message });
}
