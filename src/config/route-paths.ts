/**
 * Route paths as `routes[].path` writes them and as requests are matched
 * against them: pure string rules, shared by config validation and the route
 * table (src/routing/route-table.ts).
 */

/** `/assets/` and `/assets` are one route: a prefix on segment boundaries. */
export function normalRoutePath(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, '') || '/' : path;
}

/** Whether `path` is `prefix` or lies under it on a segment boundary (`/api` covers `/api/x`, never `/apix`). */
export function isUnder(path: string, prefix: string): boolean {
  if (prefix === '/') return true;
  return path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 47 /* / */);
}

const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i;

/**
 * Whether a request path holds a `.` or `..` segment, raw or percent-encoded,
 * or a backslash: such a path could match one route here and mean another
 * path at the upstream (`/assets/../admin`), so it is refused, never matched.
 */
export function isAmbiguousPath(path: string): boolean {
  return DOT_SEGMENT.test(path) || path.includes('\\') || /%5c/i.test(path);
}
