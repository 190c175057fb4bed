import type { IncomingHttpHeaders } from 'node:http';

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) plus what this proxy consumes itself
 * (`proxy-authorization`; `expect` is answered by Node already): never
 * forwarded in either direction.
 */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'expect',
]);

/** Connection values that name no other header: skipped without splitting, as nearly every request has one. */
const PLAIN_CONNECTION: ReadonlySet<string> = new Set(['keep-alive', 'close', 'Keep-Alive', 'Close']);

/**
 * Copies `headers` without the hop-by-hop ones, those the Connection header
 * names included, and without those `skip` refuses. Copying into a new
 * object is cheaper than deleting keys, which slows every later access.
 */
export function endToEndHeaders(headers: IncomingHttpHeaders, skip?: (name: string) => boolean): IncomingHttpHeaders {
  const named = connectionNames(headers.connection);
  const copy: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || named?.has(name) === true || skip?.(name) === true) continue;
    copy[name] = headers[name];
  }
  return copy;
}

function connectionNames(connection: string | undefined): Set<string> | undefined {
  if (connection === undefined || PLAIN_CONNECTION.has(connection)) return undefined;
  return new Set(connection.split(',').map((name) => name.trim().toLowerCase()));
}
