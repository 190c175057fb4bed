import type { Config } from '../schema.js';

/**
 * A check that spans several keys or needs more than a type. `reads` names
 * the keys it depends on besides the ones it reports on: when one of them
 * is already known to be wrong, the rule is skipped rather than report a
 * consequence of a value the operator did not write.
 */
export interface Rule {
  reads: readonly string[];
  check(config: Config): string[];
}

/** The URL `value` names, or undefined when it does not parse. */
export function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** An absolute path of URL path characters (RFC 3986 §3.3), as `paths.*` and `routes[].path` are written. */
export const PATH_PATTERN = /^\/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/;
