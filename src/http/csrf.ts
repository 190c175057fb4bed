import type { FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../config/schema.js';

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** Whether a request with this method and these headers must be refused as cross-site. */
export type CrossSiteRule = (method: string, headers: IncomingHttpHeaders) => boolean;

/**
 * Builds the cross-site request rule (SECURITY.md; the browser-based-apps
 * draft's BFF CSRF defence). An unsafe request is refused when its Origin is
 * present and not allowed (`null` included), or when `Sec-Fetch-Site:
 * cross-site` comes without an allowed Origin, or when a required custom
 * header is configured and missing. A request with neither header passes:
 * it does not come from a browser page on another site. Forward-auth
 * applies it to the original request's method (src/routes/forward-auth.ts).
 */
export function createCrossSiteRule(config: Config, allowed: ReadonlySet<string>): CrossSiteRule {
  const requiredHeader = config.csrf.requiredHeader?.toLowerCase();
  return (method, headers) => {
    if (SAFE_METHODS.has(method)) return false;
    const { origin } = headers;
    if (requiredHeader !== undefined && headers[requiredHeader] === undefined) return true;
    if (origin !== undefined) return !allowed.has(origin);
    return headers['sec-fetch-site'] === 'cross-site';
  };
}

/** The publicUrl origin and `csrf.allowedOrigins`. */
export function allowedOrigins(config: Config): ReadonlySet<string> {
  return new Set([new URL(config.server.publicUrl).origin, ...config.csrf.allowedOrigins]);
}

/**
 * `rule` for a request itself (a proxied request, a logout).
 * @returns a predicate that is true when the request must be refused
 */
export function requestCheck(rule: CrossSiteRule): (request: FastifyRequest) => boolean {
  return (request) => rule(request.method, request.headers);
}
