import type { Config, RouteConfig } from '../config/schema.js';
import { compileAllow, type Allow } from './allow.js';
import { isUnder, normalRoutePath } from '../config/route-paths.js';
import { compileTokenTargets, type TokenTarget } from '../config/token-targets.js';
import { LRUCache } from 'lru-cache';
import type { CachedAssertion, RouteAssertion } from '../assertion/identity-assertions.js';
import type { StepUpRequirement } from '../oauth/step-up.js';

export type RouteAuth = 'required' | 'optional' | 'public';

/** A header the gateway sets from a claim of the signed-in user. */
export interface IdentityHeader {
  /** Lower-case header name. */
  name: string;
  claim: string;
}

/** One compiled entry of `routes` (README "Routes"). */
export interface Route {
  /** The configured path without a trailing slash ('/' stays '/'). */
  path: string;
  /** How many segments `path` has (0 for '/'): what `stripPrefix` removes. */
  segments: number;
  /** What metrics and access-log lines call the route: its path, or `proxy` for the one-route form. */
  label: string;
  /** `http://host:port` of the upstream: the only host this route's requests, and its tokens, go to. */
  origin: string;
  /** The upstream URL's path without a trailing slash ('' for none). */
  basePath: string;
  stripPrefix: boolean;
  auth: RouteAuth;
  /** Whether a token of the user goes upstream: the sign-in access token, or `target`'s. */
  sendsToken: boolean;
  /** The route's own token target (README "A token for each API"); undefined sends the sign-in access token. */
  target: TokenTarget | undefined;
  onUnauthenticated: 'auto' | 'page' | '401';
  headers: readonly IdentityHeader[];
  /** Who may pass once signed in; undefined lets every signed-in user pass. */
  allow: Allow | undefined;
  /** What the sign-in behind a session must have been (README "Step-up"); undefined: any sign-in passes. */
  stepUp: StepUpRequirement | undefined;
  websocket: boolean;
  /** Whether a browser session admits a request (`accept` holds `session`). */
  acceptsSession: boolean;
  /** Whether a machine client's own bearer token admits a request (`accept` holds `bearer`, README "Machine clients"). */
  acceptsBearer: boolean;
  /** Seconds to the upstream's response head. */
  timeout: number;
  /** The signed identity assertion the upstream receives (README "Identity assertion"); undefined without one. */
  assertion: RouteAssertion | undefined;
}

/** The routes, compiled once at start-up. */
export interface RouteTable {
  /** Longest path first. */
  readonly routes: readonly Route[];
  /** Every header any route names (lower case): removed from every incoming request on every route. */
  readonly identityHeaderNames: ReadonlySet<string>;
  /** The distinct token targets the routes name (README "A token for each API"). */
  readonly targets: readonly TokenTarget[];
  /** The route whose path is the longest prefix of `path` (no query) on a segment boundary; undefined when none is. */
  match(path: string): Route | undefined;
}

/** The assertion header when a route names none; removed from every incoming request even when no route sends one. */
export const DEFAULT_ASSERTION_HEADER = 'x-gatehouse-assertion';

/** The one route of a config without `routes` (README "Routes"). */
const ONE_ROUTE_LABEL = 'proxy';

/**
 * Compiles `routes` (or a site's, README "Several sites"), or the one-route form `{path: /, upstream, auth: required}`.
 * The config has passed `check`, so every upstream is an absolute http(s) URL.
 * @example compileRoutes(config).match('/api/orders/7')?.origin // 'http://orders:8080'
 */
export function compileRoutes(config: Config, given: readonly RouteConfig[] | undefined = config.routes): RouteTable {
  const entries: readonly RouteConfig[] = given ?? [
    { path: '/', upstream: config.upstream, stripPrefix: false, auth: 'required', onUnauthenticated: 'auto', headers: {}, websocket: false, accept: ['session'], timeout: 30 },
  ];
  const { targets, byRoute } = compileTokenTargets({ routes: given });
  const routes = entries.map((entry, index) => compileRoute(entry, given === undefined ? ONE_ROUTE_LABEL : undefined, byRoute[index], config.session.cacheSize));
  routes.sort((a, b) => b.path.length - a.path.length);
  // An assertion header is the gateway's on every route, whichever route sends one (README "Identity assertion").
  const identityHeaderNames = new Set([
    ...routes.flatMap((route) => route.headers.map((header) => header.name)),
    DEFAULT_ASSERTION_HEADER,
    ...routes.flatMap((route) => (route.assertion === undefined ? [] : [route.assertion.header])),
  ]);
  return {
    routes,
    identityHeaderNames,
    targets,
    match(path) {
      for (const route of routes) {
        if (isUnder(path, route.path)) return route;
      }
      return undefined;
    },
  };
}

function compileRoute(entry: RouteConfig, label: string | undefined, target: TokenTarget | undefined, cacheSize: number): Route {
  const upstream = new URL(entry.upstream);
  const path = normalRoutePath(entry.path);
  return {
    path,
    segments: path === '/' ? 0 : path.split('/').length - 1,
    label: label ?? path,
    origin: upstream.origin,
    basePath: upstream.pathname.replace(/\/+$/, ''),
    stripPrefix: entry.stripPrefix,
    auth: entry.auth,
    sendsToken: target !== undefined || (entry.token ?? (entry.auth === 'public' ? 'none' : 'access')) === 'access',
    target,
    onUnauthenticated: entry.onUnauthenticated,
    headers: Object.entries(entry.headers).map(([name, claim]) => ({ name: name.toLowerCase(), claim })),
    allow: entry.allow === undefined ? undefined : compileAllow(entry.allow),
    stepUp: entry.stepUp === undefined ? undefined : Object.freeze({ ...entry.stepUp }),
    websocket: entry.websocket,
    acceptsSession: entry.accept.includes('session'),
    acceptsBearer: entry.accept.includes('bearer'),
    timeout: entry.timeout,
    assertion:
      entry.assertion === undefined
        ? undefined
        : {
            header: entry.assertion.header.toLowerCase(),
            audience: entry.assertion.audience ?? upstream.origin,
            claims: entry.assertion.claims,
            cache: new LRUCache<string, CachedAssertion>({ max: cacheSize }),
          },
  };
}

/**
 * The path and query sent upstream for a request path (and query) under
 * `route`: the route's prefix removed when it strips it, the upstream's base
 * path in front.
 * @example upstreamPath(ordersRoute, '/api/orders/7?x=1') // '/v1/7?x=1' with stripPrefix and upstream http://orders/v1
 */
export function upstreamPath(route: Route, url: string): string {
  let rest = url;
  if (route.stripPrefix && route.path !== '/') {
    rest = url.slice(route.path.length);
    if (rest === '' || rest[0] === '?') rest = `/${rest}`;
  }
  return route.basePath === '' ? rest : `${route.basePath}${rest}`;
}
