/** The request a reverse proxy asks forward-auth about, as its headers describe it. */
export interface OriginalRequest {
  ok: true;
  method: string;
  /** Path and query, as the browser sent them. */
  url: string;
  /** Path alone. */
  path: string;
  /**
   * The host the proxy names (X-Forwarded-Host, or the host of an absolute
   * X-Original-URL): what picks the site (README "Several sites"); undefined
   * when neither names one, null when they disagree or X-Forwarded-Host came twice.
   */
  host: string | null | undefined;
}

/** Headers that describe the original request ambiguously: answered 400, nothing guessed. */
export interface OriginalRefusal {
  ok: false;
  reason: string;
}

/** Each header as Node's `headersDistinct` gives it: every copy the request carried. */
export type DistinctHeaders = Readonly<Record<string, readonly string[] | undefined>>;

/**
 * The original request from `X-Forwarded-Method` and `X-Forwarded-Uri`
 * (Traefik, Caddy) or `X-Original-Method` and `X-Original-URL` (nginx; a
 * path, or an absolute URL whose host is ignored), `fallbackMethod` when
 * neither names a method (nginx's auth_request keeps the original one).
 * Envoy's ext_authz instead appends the original path and query to the
 * endpoint's (`/forward-auth/api/x?y`): `suffix` is that remainder.
 *
 * A browser can add either form's headers itself, and a proxy that sets one
 * form passes the other on (README "Behind nginx, Caddy, Traefik or Envoy"):
 * so no form is preferred. A header sent twice, or two sources that name
 * different URIs or methods, is refused (the GHSA-7x63-xv5r-3p2x class of
 * oauth2-proxy). Without a URI that is a path, nothing is guessed either.
 * A path such as `//evil.example` is still a path here; `safeReturnTo`
 * alone judges redirect targets.
 */
export function originalRequest(headers: DistinctHeaders, fallbackMethod: string, suffix?: string): OriginalRequest | OriginalRefusal {
  const forwardedMethod = one(headers, 'x-forwarded-method');
  const originalMethod = one(headers, 'x-original-method');
  const forwardedUri = one(headers, 'x-forwarded-uri');
  const originalUrl = one(headers, 'x-original-url');
  for (const value of [forwardedMethod, originalMethod, forwardedUri, originalUrl]) {
    if (value === null) return { ok: false, reason: 'a header naming the original request was sent more than once' };
  }
  const methods = [forwardedMethod, originalMethod].filter(isGiven).map((method) => method.toUpperCase());
  if (methods.length > 1 && methods[0] !== methods[1]) return { ok: false, reason: 'X-Forwarded-Method and X-Original-Method disagree' };
  const uris: string[] = [];
  for (const given of [forwardedUri, originalUrl, suffix]) {
    if (!isGiven(given)) continue;
    const url = pathAndQuery(given);
    if (url === undefined) return { ok: false, reason: 'the original URI is neither a path nor an http(s) URL' };
    uris.push(url);
  }
  if (uris.length === 0) return { ok: false, reason: 'the proxy sent neither X-Forwarded-Uri nor X-Original-URL with a path' };
  if (uris.some((url) => url !== uris[0])) return { ok: false, reason: 'X-Forwarded-Uri and X-Original-URL name different requests' };
  const forwardedHost = one(headers, 'x-forwarded-host');
  const urlHost = isGiven(originalUrl) ? ABSOLUTE_HOST.exec(originalUrl)?.[1] : undefined;
  const hosts = [forwardedHost, urlHost].filter(isGiven).map((host) => host.toLowerCase());
  const url = uris[0]!;
  const query = url.indexOf('?');
  return { ok: true, method: methods[0] ?? fallbackMethod.toUpperCase(), url, path: query < 0 ? url : url.slice(0, query), host: forwardedHost === null || (hosts.length > 1 && hosts[0] !== hosts[1]) ? null : hosts[0] };
}

/** The header's one value; null when it was given more than once. */
function one(headers: DistinctHeaders, name: string): string | undefined | null {
  const values = headers[name];
  if (values === undefined || values.length === 0) return undefined;
  if (values.length > 1) return null;
  return values[0] === '' ? undefined : values[0];
}

function isGiven(value: string | undefined | null): value is string {
  return typeof value === 'string' && value !== '';
}

/** An absolute http(s) URI: its path and query are read as they are written (no dot segment resolved). */
const ABSOLUTE = /^https?:\/\/[^/?#]*([^#]*)/i;
/** The host (and port) of an absolute http(s) URI, without user information. */
const ABSOLUTE_HOST = /^https?:\/\/(?:[^/?#@]*@)?([^/?#@]*)/i;

/** `/a?b` as it is; `https://host/a?b` -> `/a?b` (the host is the proxy's business); anything else undefined. */
function pathAndQuery(uri: string): string | undefined {
  if (uri[0] === '/') return uri;
  const rest = ABSOLUTE.exec(uri)?.[1];
  if (rest === undefined) return undefined;
  return rest === '' || rest[0] === '?' ? `/${rest}` : rest;
}
