import createError, { type FastifyError } from '@fastify/error';

/**
 * Every error gatehouse answers with. The README's "Errors" table documents
 * each code: when it happens, its status, what the operator should do.
 * `slug` is the stable `error` field of JSON bodies; `message` is what a
 * person reads (never an authorization server's or upstream's own text).
 */
const ERROR_TABLE = {
  GH_ERR_REQUEST_INVALID: { status: 400, slug: 'bad_request', message: 'The request is malformed: %s.' },
  GH_ERR_METHOD_NOT_ALLOWED: { status: 405, slug: 'method_not_allowed', message: 'This gateway path does not accept this method.' },
  GH_ERR_CALLBACK_STATE: {
    status: 400,
    slug: 'invalid_state',
    message: 'This sign-in response does not belong to a sign-in started in this browser in the last 10 minutes, or it was already used. Please sign in again.',
  },
  GH_ERR_CALLBACK_DENIED: { status: 400, slug: 'sign_in_failed', message: 'Sign-in did not complete: %s' },
  GH_ERR_CALLBACK_REJECTED: {
    status: 400,
    slug: 'sign_in_failed',
    message: 'Sign-in did not complete: the authorization server did not accept the sign-in response. Please sign in again.',
  },
  GH_ERR_CALLBACK_IDENTITY: {
    status: 502,
    slug: 'sign_in_failed',
    message: 'Sign-in did not complete: the authorization server did not identify the user.',
  },
  GH_ERR_SESSION_REQUIRED: { status: 401, slug: 'unauthorized', message: 'You are not signed in, or your session has ended.' },
  GH_ERR_RATE_LIMITED: {
    status: 429,
    slug: 'too_many_requests',
    message: 'Too many sign-in requests from this address. Please wait a minute and try again.',
  },
  GH_ERR_LOGOUT_TOKEN_INVALID: { status: 400, slug: 'invalid_request', message: 'The logout token is invalid: %s.' },
  GH_ERR_CSRF_REJECTED: { status: 403, slug: 'forbidden', message: 'Cross-site requests that change data are not allowed.' },
  GH_ERR_PROVIDER_UNAVAILABLE: {
    status: 503,
    slug: 'provider_unavailable',
    message: 'The authorization server cannot be reached right now. Please try again shortly.',
  },
  GH_ERR_STORE_UNAVAILABLE: { status: 503, slug: 'store_unavailable', message: 'The session store cannot be reached right now. Please try again shortly.' },
  GH_ERR_UPSTREAM_UNAVAILABLE: { status: 502, slug: 'bad_gateway', message: 'The service behind the gateway cannot be reached.' },
  GH_ERR_INTERNAL: { status: 500, slug: 'internal_error', message: 'Something went wrong in the gateway.' },
} as const;

export type ErrorCode = keyof typeof ERROR_TABLE;

export interface GatehouseError extends FastifyError {
  code: ErrorCode;
  statusCode: number;
}

const constructors = Object.fromEntries(
  Object.entries(ERROR_TABLE).map(([code, { status, message }]) => [code, createError(code, message, status)]),
) as Record<ErrorCode, createError.FastifyErrorConstructor>;

/**
 * Creates the error for `code`, keeping `cause` for the log.
 * @example throw gatehouseError('GH_ERR_STORE_UNAVAILABLE', { cause: err })
 */
export function gatehouseError(code: ErrorCode, options: { cause?: unknown; detail?: string } = {}): GatehouseError {
  const error = (options.detail === undefined ? new constructors[code]() : new constructors[code](options.detail)) as GatehouseError;
  if (options.cause !== undefined) error.cause = options.cause;
  return error;
}

/** The stable `error` field of JSON bodies for a code. */
export function errorSlug(code: ErrorCode): string {
  return ERROR_TABLE[code].slug;
}

export function isGatehouseError(error: unknown): error is GatehouseError {
  const code = (error as { code?: unknown } | undefined)?.code;
  return error instanceof Error && typeof code === 'string' && code in ERROR_TABLE;
}

export { ERROR_TABLE };
