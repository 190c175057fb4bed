import type { IncomingHttpHeaders } from 'node:http';

/** The request a reverse proxy asks forward-auth about, as its headers describe it. */
export interface OriginalRequest {
  method: string;
  /** Path and query, as the browser sent them. */
  url: string;
  /** Path alone, for the route table. */
  path: string;
}

/**
 * The original request from `X-Forwarded-Method` and `X-Forwarded-Uri`
 * (Traefik, Caddy) or `X-Original-Method` and `X-Original-URL` (nginx; a
 * path, or an absolute URL whose host is ignored), `fallbackMethod` when
 * neither names a method (nginx's auth_request keeps the original one).
 * Envoy's ext_authz instead appends the original path and query to the
 * endpoint's (`/forward-auth/api/x?y`): `suffix` is that remainder, used when
 * no header names the URI. Undefined without a URI that is a path: nothing is guessed. A path such
 * as `//evil.example` is still a path here; `safeReturnTo` alone judges
 * redirect targets (README "Behind nginx, Caddy, Traefik or Envoy").
 */
export function originalRequest(headers: IncomingHttpHeaders, fallbackMethod: string, suffix?: string): OriginalRequest | undefined {
  const method = single(headers['x-forwarded-method']) ?? single(headers['x-original-method']) ?? fallbackMethod;
  let url = single(headers['x-forwarded-uri']) ?? single(headers['x-original-url']) ?? single(suffix);
  if (url === undefined) return undefined;
  if (url[0] !== '/') {
    const absolute = URL.canParse(url) ? new URL(url) : undefined;
    if (absolute === undefined || (absolute.protocol !== 'http:' && absolute.protocol !== 'https:')) return undefined;
    url = `${absolute.pathname}${absolute.search}`;
  }
  const query = url.indexOf('?');
  return { method: method.toUpperCase(), url, path: query < 0 ? url : url.slice(0, query) };
}

function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
