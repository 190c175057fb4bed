import { gatehouseError, type GatehouseError } from '../errors.js';
import { normalPath, pathAfterSegments } from '../http/request-path.js';
import type { Route, RouteTable } from '../routing/route-table.js';

/**
 * A request as the gate decides it, computed once per request from its
 * target (README "Routes", the path rule): the proxy, the WebSocket upgrade
 * and forward-auth each build one and decide on it, never on the raw path.
 */
export interface RequestView {
  /** The route chosen on the normalised path. */
  route: Route;
  /** The normalised path (src/http/request-path.ts), without the query. */
  path: string;
  /** What the route table matched: `path` without `;` parameters and empty segments. */
  match: string;
  /** The path the upstream receives, without the query: the route's base path, then `path` (its prefix removed with `stripPrefix`). */
  upstreamPath: string;
  /** The query as the browser sent it, with its `?`; '' without one. */
  query: string;
  /** The method as sent (upper case from every browser and proxy). */
  method: string;
}

/**
 * The view of `target` (a request target, or forward-auth's original URL:
 * path and query) under `routes`; the 400 (a path the rule refuses, a
 * target that is not a path) or 404 (no route) it is answered with
 * otherwise. Returned, not thrown: each way in answers it its own way.
 * @example requestView(routes, '/%61pi/x?y=1', 'GET') // { route: /api, path: '/api/x', upstreamPath: '/api/x', query: '?y=1', ... }
 */
export function requestView(routes: RouteTable, target: string, method: string): RequestView | GatehouseError {
  const queryAt = target.indexOf('?');
  const raw = queryAt < 0 ? target : target.slice(0, queryAt);
  const normal = normalPath(raw);
  if (!normal.ok) return gatehouseError('GH_ERR_REQUEST_INVALID', { detail: normal.reason });
  const route = routes.match(normal.match);
  if (route === undefined) return gatehouseError('GH_ERR_ROUTE_NOT_FOUND');
  return {
    route,
    path: normal.path,
    match: normal.match,
    upstreamPath: upstreamPathOf(route, normal.path, normal.match),
    query: queryAt < 0 ? '' : target.slice(queryAt),
    method,
  };
}

export function isRequestView(view: RequestView | GatehouseError): view is RequestView {
  return !(view instanceof Error);
}

/**
 * The path sent upstream under `route`: the route's prefix removed when it
 * strips it (counted in segments when `path` has `;` parameters or empty
 * segments the match ignored), the upstream's base path in front.
 */
function upstreamPathOf(route: Route, path: string, match: string): string {
  let rest = path;
  if (route.stripPrefix && route.path !== '/') {
    rest = path === match ? path.slice(route.path.length) || '/' : pathAfterSegments(path, route.segments);
  }
  return route.basePath === '' ? rest : `${route.basePath}${rest}`;
}
