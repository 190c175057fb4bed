import type { Config } from '../schema.js';
import { isAmbiguousPath, isUnder, normalRoutePath } from '../route-paths.js';
import { parseUrl, PATH_PATTERN, type Rule } from './rule.js';

/** Headers the gateway sets itself on every upstream request (or that frame the message): never an identity header. */
/** A domain as `allow.emailDomains` compares it: labels of letters, digits and dashes. */
const EMAIL_DOMAIN = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
export const RESERVED_HEADERS = new Set([
  'authorization',
  'cookie',
  'host',
  'dpop',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'forwarded',
  'connection',
  'content-length',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'keep-alive',
  'proxy-authorization',
]);

/** `upstream` and `routes`: where requests go, who may pass, which headers they carry. */
export const ROUTE_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ upstream, routes }) {
      if (routes !== undefined) return [];
      const url = parseUrl(upstream);
      return url && ['http:', 'https:'].includes(url.protocol) ? [] : ['upstream: must be an absolute http(s) URL such as http://127.0.0.1:3000'];
    },
  },
  {
    reads: [],
    check({ routes = [] }) {
      return routes.flatMap((route, index) => {
        const problems: string[] = [];
        const key = `routes[${index}]`;
        if (!PATH_PATTERN.test(route.path) || route.path.includes('//') || isAmbiguousPath(route.path)) {
          problems.push(`${key}.path: must be an absolute path such as /api/orders (no //, . or .. segments, query or fragment)`);
        }
        const upstream = parseUrl(route.upstream);
        if (!upstream || !['http:', 'https:'].includes(upstream.protocol)) {
          problems.push(`${key}.upstream: must be an absolute http(s) URL such as http://orders:8080 or http://orders:8080/v1`);
        } else if (upstream.search || upstream.hash || upstream.username || upstream.password) {
          problems.push(`${key}.upstream: must not contain a query, fragment or credentials`);
        }
        if (route.auth === 'public' && route.token === 'access') {
          problems.push(`${key}.token: access is not allowed on a public route (it reads no session); use auth: optional to send a token when signed in`);
        }
        if (route.allow !== undefined && route.auth !== 'required') {
          problems.push(`${key}.allow: only on a route with auth: required (it has auth: ${route.auth})`);
        }
        if (route.stepUp !== undefined) problems.push(...stepUpProblems(route, key));
        route.allow?.emailDomains?.forEach((domain, at) => {
          if (!EMAIL_DOMAIN.test(domain)) problems.push(`${key}.allow.emailDomains[${at}]: must be a domain such as example.com (no @, scheme, wildcard or port), got "${domain}"`);
        });
        for (const name of Object.keys(route.headers)) {
          if (RESERVED_HEADERS.has(name.toLowerCase())) problems.push(`${key}.headers.${name}: the gateway sets this header itself; name another (e.g. X-Forwarded-User)`);
        }
        return problems;
      });
    },
  },
  {
    reads: ['provider.issuer', 'provider.scopes'],
    check({ routes = [], provider }) {
      // acr and auth_time are claims of a validated ID token: a plain OAuth 2.0 server, or no openid scope, gives none.
      if (provider.issuer !== undefined && provider.scopes.includes('openid')) return [];
      return routes.flatMap((route, index) =>
        route.stepUp === undefined ? [] : [`routes[${index}].stepUp: needs an OpenID provider (provider.issuer and the openid scope): acr and auth_time come from its ID token`],
      );
    },
  },
  {
    reads: ['paths'],
    check({ routes = [], paths }) {
      const problems: string[] = [];
      const seen = new Map<string, number>();
      routes.forEach((route, index) => {
        const path = normalRoutePath(route.path);
        const other = seen.get(path);
        if (other !== undefined) problems.push(`routes[${index}].path: same path as routes[${other}] (${routes[other]!.path})`);
        else seen.set(path, index);
        const gatewayPath = Object.entries(paths).find(([, own]) => isUnder(path, own));
        if (gatewayPath !== undefined) {
          problems.push(`routes[${index}].path: ${route.path} is the gateway's own paths.${gatewayPath[0]} (${gatewayPath[1]}) or lies under it; gateway paths come before every route`);
        }
      });
      return problems;
    },
  },
];

/**
 * Route settings that work but do not do what they seem to: `headers` on a
 * public route (it reads no session, so they are only ever removed from
 * incoming requests, never sent), and `websocket: true` with
 * `forwardAuth.only` (the proxy in front carries the socket; gatehouse
 * decides the handshake but cannot close it when the session ends).
 */
export function routeWarnings({ routes = [], forwardAuth }: Config): string[] {
  return routes.flatMap((route, index) => {
    const warnings: string[] = [];
    if (route.auth === 'public' && Object.keys(route.headers).length > 0) {
      warnings.push(
        `routes[${index}].headers: a public route reads no session, so its identity headers are never sent (only removed from requests); use auth: optional to send them to signed-in users`,
      );
    }
    if (route.websocket && forwardAuth.only) {
      warnings.push(
        `routes[${index}].websocket: with forwardAuth.only the proxy in front carries WebSockets; gatehouse only decides the handshake and cannot close a socket when its session ends (README "Behind nginx, Caddy, Traefik or Envoy")`,
      );
    }
    return warnings;
  });
}

/**
 * `stepUp` guards a route only where every request needs a session: on an
 * optional route a request without one passes anyway, so asking a signed-in
 * user for more would guard nothing (README "Step-up").
 */
function stepUpProblems(route: NonNullable<Config['routes']>[number], key: string): string[] {
  const { stepUp, auth } = route;
  if (stepUp === undefined) return [];
  const problems: string[] = [];
  if (auth !== 'required') problems.push(`${key}.stepUp: only on a route with auth: required (it has auth: ${auth}; without a session the request would pass anyway)`);
  if (stepUp.acr === undefined && stepUp.maxAge === undefined) problems.push(`${key}.stepUp: give acr (acceptable acr values) and/or maxAge (how old the sign-in may be)`);
  // A machine client's token comes from no interactive sign-in: there is nothing it could step up (README "Step-up").
  if (route.accept.includes('bearer')) problems.push(`${key}.stepUp: cannot go with accept: bearer (a machine client's token has no sign-in to step up); give the machine clients a route of their own`);
  if (stepUp.maxAge === 0) problems.push(`${key}.stepUp.maxAge: must be greater than 0 (a sign-in is never younger than 0 seconds)`);
  return problems;
}
