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
