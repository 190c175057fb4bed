import type { Site, Sites } from '../access/sites.js';

const MAX_LENGTH = 2048;
const MAX_DECODE_ROUNDS = 3;

/**
 * The local path the browser goes to after sign-in, or `/` for anything
 * that could leave the site (RFC 9700 §4.11, open redirectors): it must be a
 * single string starting with exactly one `/` (not `//` or `/\`), with no
 * backslash and no control character (C0, DEL, C1), raw or percent-encoded
 * at any depth (README "What the browser sees"). Spaces and non-ASCII characters are allowed and
 * returned percent-encoded (UTF-8), so the result is always printable ASCII
 * and a valid Location header.
 * @example safeReturnTo('/orders?id=7') // '/orders?id=7'
 * @example safeReturnTo('/café') // '/caf%C3%A9'
 * @example safeReturnTo('//evil.example') // '/'
 */
export function safeReturnTo(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_LENGTH) return '/';
  if (!isSafeLocalPath(value)) return '/';
  let decoded = value;
  for (let round = 0; round < MAX_DECODE_ROUNDS; round += 1) {
    const next = decodeOnce(decoded);
    if (next === undefined || !isSafeLocalPath(next)) return '/';
    if (next === decoded) return encodeUnprintable(value);
    decoded = next;
  }
  // More layers of encoding than any honest link carries.
  return '/';
}

/** Starts with one `/` not followed by `/` or `\`; no backslash, no C0 control, DEL or C1 control. */
function isSafeLocalPath(path: string): boolean {
  if (path[0] !== '/' || path[1] === '/' || path[1] === '\\') return false;
  for (let index = 0; index < path.length; index += 1) {
    const code = path.charCodeAt(index);
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x5c) return false;
  }
  return true;
}

function decodeOnce(path: string): string | undefined {
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined;
  }
}

const UNPRINTABLE = /[^\x21-\x7e]+/g;

/** Percent-encodes spaces and non-ASCII (UTF-8); '/' when too long then or when it holds a lone surrogate. */
function encodeUnprintable(path: string): string {
  let encoded: string;
  try {
    encoded = path.replace(UNPRINTABLE, (run) => encodeURIComponent(run));
  } catch {
    return '/';
  }
  return encoded.length > MAX_LENGTH ? '/' : encoded;
}

/** Where sign-in returns a browser to on a site (README "Several sites"). */
export interface SiteReturn {
  site: Site;
  /** A path (and query) of the site, by the rules of {@link safeReturnTo}. */
  path: string;
}

/**
 * `value` when it is an absolute URL on a configured site's host (the
 * scheme publicUrl's, no user information): that site and the path to
 * return to; undefined for anything else, which {@link safeReturnTo} then
 * judges as a path of the sign-in host (a foreign URL becomes `/`).
 * @example siteReturnTo('https://app.example.com/orders?id=7', sites) // { site: app.example.com, path: '/orders?id=7' }
 */
export function siteReturnTo(value: unknown, sites: Sites): SiteReturn | undefined {
  if (!sites.several || typeof value !== 'string' || value.length > MAX_LENGTH || !/^https?:\/\//i.test(value)) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  const site = sites.ofUrl(url);
  return site === undefined ? undefined : { site, path: safeReturnTo(`${url.pathname}${url.search}`) };
}
