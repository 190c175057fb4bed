import createError, { type FastifyError } from '@fastify/error';

/** Which page: also the file name an operator may put in `pages.dir` (`signed-out.html`). */
export type PageName = 'sign-in-required' | 'signed-out' | 'sign-in-failed' | 'forbidden' | 'upstream-unreachable' | 'unavailable' | 'signed-in' | 'refused';

/** A row of the registry: how an error is answered. */
interface ErrorRow {
  /** HTTP status it is answered with (a caller may name another where it makes the error). */
  status: number;
  /** The stable `error` field of JSON bodies. */
  slug: string;
  /** What a person reads; `%s` takes the error's detail. */
  message: string;
  /** Heading of the HTML page a navigation gets. */
  title: string;
  /** Which page template renders it (README "Pages"; an operator's `pages.dir/<page>.html`); default `refused`. */
  page?: PageName;
  /** JSON bodies are exactly `{"error": slug}`, no message (README "Errors" and "Sessions"), plus `reason` when there is one. */
  bare?: true;
  /** A machine-readable cause beside the slug, for clients that must tell two refusals of one slug apart. */
  reason?: string;
}

const REFUSED = 'Request refused';
const SIGN_IN_FAILED = 'Sign-in did not complete';
const UNAVAILABLE = 'Service unavailable';

/**
 * Every error gatehouse answers with. The README's "Errors" table documents
 * each code: when it happens, its status, what the operator should do.
 * `message` is never an authorization server's or upstream's own text.
 */
const REGISTRY = {
  /** Start-up or `check` found configuration problems: never answered over HTTP, the process exits 1. */
  GH_ERR_CONFIG_INVALID: { status: 500, slug: 'config_invalid', message: '%s', title: REFUSED },
  GH_ERR_REQUEST_INVALID: { status: 400, slug: 'bad_request', message: 'The request is malformed: %s.', title: REFUSED },
  GH_ERR_METHOD_NOT_ALLOWED: { status: 405, slug: 'method_not_allowed', message: 'This gateway path does not accept this method.', title: REFUSED },
  GH_ERR_CALLBACK_STATE: {
    status: 400,
    slug: 'invalid_state',
    message: 'This sign-in response does not belong to a sign-in started in this browser in the last 10 minutes, or it was already used. Please sign in again.',
    title: SIGN_IN_FAILED,
    page: 'sign-in-failed',
  },
  GH_ERR_HANDOFF_INVALID: {
    status: 400,
    slug: 'invalid_request',
    message: 'This sign-in link is not valid here: it was already used, it is older than a minute, or it was made for another site. Please sign in again.',
    title: SIGN_IN_FAILED,
    page: 'sign-in-failed',
  },
  GH_ERR_CALLBACK_DENIED: { status: 400, slug: 'sign_in_failed', message: 'Sign-in did not complete: %s', title: SIGN_IN_FAILED, page: 'sign-in-failed' },
  GH_ERR_CALLBACK_REJECTED: {
    status: 400,
    slug: 'sign_in_failed',
    message: 'Sign-in did not complete: the authorization server did not accept the sign-in response. Please sign in again.',
    title: SIGN_IN_FAILED,
    page: 'sign-in-failed',
  },
  GH_ERR_CALLBACK_IDENTITY: { status: 502, slug: 'sign_in_failed', message: 'Sign-in did not complete: the authorization server did not identify the user.', title: SIGN_IN_FAILED, page: 'sign-in-failed' },
  GH_ERR_LOGIN_PUSH_REJECTED: {
    status: 502,
    slug: 'sign_in_failed',
    message: 'Sign-in could not start: the authorization server refused the pushed authorization request.',
    title: SIGN_IN_FAILED,
    page: 'sign-in-failed',
  },
  GH_ERR_SESSION_REQUIRED: { status: 401, slug: 'unauthorized', message: 'You are not signed in, or your session has ended.', title: 'Sign in required', page: 'sign-in-required', bare: true },
  GH_ERR_COOKIE_REFUSED: {
    status: 401,
    slug: 'unauthorized',
    message: 'You signed in, but this browser did not keep the session cookie, so every page would send you back to sign-in. Allow cookies for this site (or leave private browsing with third-party cookie blocking for it), then sign in again.',
    title: 'Sign in required',
    page: 'sign-in-required',
    bare: true,
  },
  GH_ERR_STEP_UP_REQUIRED: {
    status: 401,
    slug: 'insufficient_user_authentication',
    message: 'This part of the application needs a stronger or more recent sign-in.',
    title: 'A stronger sign-in is required',
    page: 'sign-in-required',
    bare: true,
  },
  GH_ERR_STEP_UP_NOT_MET: {
    status: 403,
    slug: 'insufficient_user_authentication',
    message: 'A stronger sign-in is required: the sign-in that just completed was not strong or recent enough for this part of the application.',
    title: 'A stronger sign-in is required',
    page: 'sign-in-failed',
  },
  GH_ERR_NOT_ALLOWED: { status: 403, slug: 'forbidden', message: 'You are signed in as %s, but this account may not use this part of the application.', title: 'Forbidden', page: 'forbidden', bare: true },
  GH_ERR_BEARER_REQUIRED: { status: 401, slug: 'unauthorized', message: 'This path needs a bearer token (Authorization: Bearer).', title: 'Sign in required' },
  GH_ERR_BEARER_INVALID: { status: 401, slug: 'invalid_token', message: 'The bearer token is invalid, expired, or not meant for this gateway.', title: REFUSED },
  GH_ERR_BEARER_NOT_ALLOWED: { status: 403, slug: 'forbidden', message: 'The caller %s may not use this path.', title: 'Forbidden' },
  GH_ERR_BEARER_UNAVAILABLE: {
    status: 503,
    slug: 'verification_unavailable',
    message: 'The bearer token cannot be checked right now (its issuer\'s keys or the introspection endpoint cannot be reached). Please try again shortly.',
    title: UNAVAILABLE,
  },
  GH_ERR_TOKEN_REFUSED: {
    status: 403,
    slug: 'forbidden',
    reason: 'token_refused',
    message: 'You are signed in as %s, but the authorization server did not issue a token for this part of the application.',
    title: 'Forbidden',
    page: 'forbidden',
    bare: true,
  },
  GH_ERR_RATE_LIMITED: { status: 429, slug: 'too_many_requests', message: 'Too many sign-in requests from this address. Please wait a minute and try again.', title: REFUSED },
  GH_ERR_WEBSOCKET_LIMIT: { status: 429, slug: 'too_many_requests', message: 'Too many WebSockets of this user or address are open. Close one and retry.', title: UNAVAILABLE, page: 'unavailable' },
  GH_ERR_USER_CONCURRENCY: { status: 429, slug: 'too_many_requests', message: 'Too many requests of this user are in progress. Please retry in a moment.', title: UNAVAILABLE, page: 'unavailable' },
  GH_ERR_LOGOUT_TOKEN_INVALID: { status: 400, slug: 'invalid_request', message: 'The logout token is invalid: %s.', title: REFUSED },
  GH_ERR_ROUTE_NOT_FOUND: { status: 404, slug: 'not_found', message: 'Nothing is served at this path.', title: 'Not found' },
  GH_ERR_SITE_UNKNOWN: { status: 404, slug: 'not_found', message: 'Nothing is served at this host.', title: 'Not found' },
  GH_ERR_CSRF_REJECTED: { status: 403, slug: 'forbidden', message: 'Cross-site requests that change data are not allowed.', title: 'Forbidden', page: 'forbidden' },
  GH_ERR_PROVIDER_UNAVAILABLE: { status: 503, slug: 'provider_unavailable', message: 'The authorization server cannot be reached right now. Please try again shortly.', title: UNAVAILABLE, page: 'unavailable' },
  GH_ERR_PROVIDER_ISSUER_MISMATCH: {
    status: 503,
    slug: 'provider_misconfigured',
    message: 'Sign-in is not possible until an operator fixes the configuration: %s.',
    title: UNAVAILABLE,
    page: 'unavailable',
  },
  GH_ERR_STORE_UNAVAILABLE: { status: 503, slug: 'store_unavailable', message: 'The session store cannot be reached right now. Please try again shortly.', title: UNAVAILABLE, page: 'unavailable', bare: true },
  GH_ERR_STORE_BUSY: { status: 503, slug: 'store_busy', message: 'Another request of this user is still in progress. Please try again shortly.', title: UNAVAILABLE, page: 'unavailable' },
  GH_ERR_UPSTREAM_UNAVAILABLE: {
    status: 502,
    slug: 'bad_gateway',
    message: 'The gateway could not reach the application behind it. Please try again in a moment.',
    title: 'Could not reach the application',
    page: 'upstream-unreachable',
  },
  GH_ERR_UPSTREAM_TIMEOUT: {
    status: 504,
    slug: 'gateway_timeout',
    message: 'The application behind the gateway did not answer in time. Please try again in a moment.',
    title: 'The application did not answer',
    page: 'upstream-unreachable',
  },
  GH_ERR_INTERNAL: { status: 500, slug: 'internal_error', message: 'Something went wrong in the gateway.', title: REFUSED },
} as const satisfies Record<string, ErrorRow>;

export type ErrorCode = keyof typeof REGISTRY;

export interface GatehouseError extends FastifyError {
  code: ErrorCode;
  statusCode: number;
}

const constructors = Object.fromEntries(
  Object.entries(REGISTRY).map(([code, { status, message }]) => [code, createError(code, message, status)]),
) as Record<ErrorCode, createError.FastifyErrorConstructor>;

/**
 * Creates the error for `code`, keeping `cause` for the log; `status`
 * overrides the registry's where one code covers several statuses.
 * @example throw gatehouseError('GH_ERR_STORE_UNAVAILABLE', { cause: err })
 */
export function gatehouseError(code: ErrorCode, options: { cause?: unknown; detail?: string; status?: number } = {}): GatehouseError {
  const error = (options.detail === undefined ? new constructors[code]() : new constructors[code](options.detail)) as GatehouseError;
  if (options.cause !== undefined) error.cause = options.cause;
  if (options.status !== undefined) error.statusCode = options.status;
  return error;
}

/** How the registry answers `code`: its JSON `error` slug, page title, and whether the JSON body is bare. */
export function errorRow(code: ErrorCode): ErrorRow {
  return REGISTRY[code];
}

export function isGatehouseError(error: unknown): error is GatehouseError {
  const code = (error as { code?: unknown } | undefined)?.code;
  return error instanceof Error && typeof code === 'string' && code in REGISTRY;
}

/** Thrown with every configuration problem found, one `key: what is wrong` line each (GH_ERR_CONFIG_INVALID). */
export class ConfigError extends Error {
  readonly code = 'GH_ERR_CONFIG_INVALID' satisfies ErrorCode;
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

/**
 * An authorization server (or its JWKS or userinfo endpoint) answered with
 * an unusable HTTP status. `classifyProviderFailure` (oauth/provider.ts) reads `status`.
 */
export class ProviderAnswerError extends Error {
  override readonly name = 'ProviderAnswerError';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}
