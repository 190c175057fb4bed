import type { Route } from './route-table.js';

/** A header value as RFC 9110 §5.5 allows it: visible ASCII, spaces and tabs inside, none at either end. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$/;

/**
 * The route's identity headers for a user's claims. A claim that is missing,
 * not a string or number, or not a valid header value (CR, LF, non-ASCII…)
 * leaves its header out: it is never sent raw (README "Routes").
 * @example identityHeaders(route, { sub: 'alice', email: 'a@example.com' }) // { 'x-forwarded-user': 'alice', ... }
 */
export function identityHeaders(route: Route, claims: Readonly<Record<string, unknown>>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const { name, claim } of route.headers) {
    const value = claims[claim];
    const text = typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
    if (text !== undefined && HEADER_VALUE.test(text)) headers[name] = text;
  }
  return headers;
}
