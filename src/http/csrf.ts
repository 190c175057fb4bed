import type { FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/**
 * Builds the cross-site request check for proxied paths (SECURITY.md; the
 * browser-based-apps draft's BFF CSRF defence). An unsafe request is refused
 * when its Origin is present and not allowed (`null` included), or when
 * `Sec-Fetch-Site: cross-site` comes without an allowed Origin, or when a
 * required custom header is configured and missing. A request with neither
 * header passes: it does not come from a browser page on another site.
 * @returns a predicate that is true when the request must be refused
 */
export function createCrossSiteCheck(config: Config): (request: FastifyRequest) => boolean {
  const allowed = new Set([new URL(config.server.publicUrl).origin, ...config.csrf.allowedOrigins]);
  const requiredHeader = config.csrf.requiredHeader?.toLowerCase();
  return (request) => {
    if (SAFE_METHODS.has(request.method)) return false;
    const { origin } = request.headers;
    if (requiredHeader !== undefined && request.headers[requiredHeader] === undefined) return true;
    if (origin !== undefined) return !allowed.has(origin);
    return request.headers['sec-fetch-site'] === 'cross-site';
  };
}
