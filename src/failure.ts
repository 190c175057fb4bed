/**
 * What a failure was, for a log line: the most telling code down an error's
 * `cause` chain. A ground module (it imports nothing), so the store, the
 * provider and the proxy can all describe their failures the same way.
 */

const MAX_CAUSE_DEPTH = 5;

/** System and undici codes, and OpenSSL's certificate verdicts (UNABLE_TO_VERIFY_LEAF_SIGNATURE, SELF_SIGNED_CERT_IN_CHAIN, CERT_HAS_EXPIRED). */
const SYSTEM_CODE = /^(E[A-Z0-9_]+|UND_ERR_[A-Z_]+|[A-Z_]*(CERT|SIGNATURE)[A-Z_]*)$/;

/**
 * The most telling code down the error's `cause` chain (and in an
 * AggregateError's errors): a system one (ECONNREFUSED, ENOTFOUND,
 * UND_ERR_CONNECT_TIMEOUT) or a certificate verdict (UNABLE_TO_VERIFY_LEAF_SIGNATURE)
 * before a wrapper's own (FST_REPLY_FROM_...).
 * @example causeCode(new TypeError('fetch failed', { cause: Object.assign(new Error(), { code: 'ECONNREFUSED' }) })) // 'ECONNREFUSED'
 */
export function causeCode(err: unknown): string | undefined {
  const codes = codesOf(err, 0);
  return codes.find((code) => SYSTEM_CODE.test(code)) ?? codes[0];
}

/** Every string `code` down the cause chain, outermost first. */
export function codesOf(err: unknown, depth = 0): string[] {
  if (!(err instanceof Error) || depth >= MAX_CAUSE_DEPTH) return [];
  const { code, errors } = err as Error & { code?: unknown; errors?: unknown };
  return [
    ...(typeof code === 'string' ? [code] : []),
    ...(Array.isArray(errors) ? errors.flatMap((inner) => codesOf(inner, depth + 1)) : []),
    ...codesOf(err.cause, depth + 1),
  ];
}
