import type { FastifyRequest } from 'fastify';

/**
 * Whether the browser is loading a page (show HTML) rather than calling an
 * API (answer JSON). `Sec-Fetch-Mode: navigate` is decisive when present;
 * otherwise an Accept naming text/html means a page. `Accept: *\/*` alone is
 * an API call: fetch() sends it, and so does curl.
 */
export function isNavigation(request: FastifyRequest): boolean {
  const mode = request.headers['sec-fetch-mode'];
  if (mode !== undefined) return mode === 'navigate';
  const accept = request.headers.accept;
  return typeof accept === 'string' && accept.includes('text/html');
}

/** Whether the request has a body (a Content-Length other than 0, or any Transfer-Encoding): one the proxy streams and cannot send twice. */
export function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}
