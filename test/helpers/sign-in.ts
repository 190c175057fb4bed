import { CookieJar } from './cookie-jar.js';

/** What the gateway's callback answered at the end of a completed sign-in. */
export interface SignInResult {
  /** `name=value` of the session cookie. */
  cookie: string;
  /** Every Set-Cookie of the callback response. */
  setCookie: string[];
  /** Where the callback sent the browser (its Location header; empty when it answered with a page). */
  location: string;
  callbackStatus: number;
}

const MAX_HOPS = 10;

/**
 * Signs a user in through a gateway and the demo authorization server, as a
 * browser would but without one: `/login`, the AS login form, `/callback`.
 * Throws when the callback sets no session cookie.
 *
 * @example
 * const { cookie } = await signIn(gateway.url, { user: 'alice', returnTo: '/api/me' });
 * const me = await fetch(`${gateway.url}/api/me`, { headers: { cookie } });
 */
export async function signIn(
  gatewayUrl: string,
  opts: { user?: string; returnTo?: string; cookieName?: string; authorizationServerJar?: CookieJar } = {},
): Promise<SignInResult> {
  const jar = new CookieJar();
  const { loginCookies, authorizationUrl } = await startLogin(gatewayUrl, opts);
  jar.store(gatewayUrl, loginCookies);
  // A pushed request (RFC 9126) leaves only client_id and request_uri in the URL: the redirect_uri is the gateway's callback.
  const redirectUri = authorizationUrl.searchParams.get('redirect_uri') ?? new URL('/callback', gatewayUrl).href;
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, opts.user ?? 'alice', opts.authorizationServerJar, redirectUri);
  const callback = await jar.fetch(callbackUrl);
  await callback.arrayBuffer();
  const cookieName = opts.cookieName ?? 'session_id';
  const session = jar.get(gatewayUrl, cookieName);
  if (session === undefined) {
    throw new Error(`callback answered ${callback.status} without a ${cookieName} cookie`);
  }
  return {
    cookie: `${cookieName}=${session}`,
    setCookie: callback.headers.getSetCookie(),
    location: callback.headers.get('location') ?? '',
    callbackStatus: callback.status,
  };
}

/**
 * Starts a login at the gateway: `GET /login` without following the redirect.
 *
 * @example
 * const { loginCookies, authorizationUrl } = await startLogin(gateway.url, { returnTo: '/private' });
 * assert.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
 */
export async function startLogin(
  gatewayUrl: string,
  opts: { returnTo?: string } = {},
): Promise<{ loginCookies: string[]; authorizationUrl: URL }> {
  const loginUrl = new URL('/login', gatewayUrl);
  if (opts.returnTo !== undefined) loginUrl.searchParams.set('returnTo', opts.returnTo);
  const response = await fetch(loginUrl, { redirect: 'manual' });
  await response.arrayBuffer();
  const location = response.headers.get('location');
  if (!isRedirect(response) || location === null) {
    throw new Error(`GET /login answered ${response.status} without a redirect`);
  }
  return { loginCookies: response.headers.getSetCookie(), authorizationUrl: new URL(location, loginUrl) };
}

/**
 * Drives the authorization server from the authorization URL to the client's
 * redirect_uri with a cookie jar of its own: follows its redirects and submits
 * its login form (devInteractions: fields `login` and `password`, any password).
 * Pass `jar` to keep the AS's session cookies (for an AS-side logout later).
 * Returns the redirect_uri URL the AS sent the browser to (with `code`, `state`
 * and `iss`, or `error`) without following it.
 *
 * @example
 * const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'bob');
 * assert.ok(callbackUrl.searchParams.get('code'));
 */
export async function approveAtAuthorizationServer(
  authorizationUrl: URL,
  user: string,
  jar = new CookieJar(),
  redirectUri = authorizationUrl.searchParams.get('redirect_uri'),
  secondFactor = false,
): Promise<URL> {
  if (redirectUri === null) throw new Error('the authorization URL has no redirect_uri');
  let url = authorizationUrl;
  let response = await jar.fetch(url);
  for (let hop = 0; hop < MAX_HOPS; hop += 1) {
    const body = await response.text();
    if (isRedirect(response)) {
      url = new URL(response.headers.get('location') ?? '', url);
      if (isAt(url, redirectUri)) return url;
      response = await jar.fetch(url);
    } else {
      url = loginFormAction(body, url, response.status);
      response = await jar.fetch(url, {
        method: 'POST',
        // `otp`: the one-time code of an AS started with signInLevels (a stronger acr); oidc-provider's own form ignores it.
        body: new URLSearchParams({ prompt: 'login', login: user, password: 'any', ...(secondFactor ? { otp: '123456' } : {}) }),
      });
    }
  }
  throw new Error(`the authorization server did not redirect to ${redirectUri} within ${MAX_HOPS} steps`);
}

function loginFormAction(html: string, pageUrl: URL, status: number): URL {
  const action = /<form\b[^>]*\baction="([^"]+)"/.exec(html)?.[1];
  if (status !== 200 || action === undefined || !html.includes('name="login"')) {
    throw new Error(`expected the login form at ${pageUrl.href}, got ${status}: ${html.slice(0, 500)}`);
  }
  return new URL(action.replaceAll('&amp;', '&'), pageUrl);
}

function isRedirect(response: Response): boolean {
  return response.status >= 300 && response.status < 400;
}

function isAt(url: URL, redirectUri: string): boolean {
  const expected = new URL(redirectUri);
  return url.origin === expected.origin && url.pathname === expected.pathname;
}

/** What a sign-in from a given login URL ended with (see {@link signInAt}). */
export interface SignInOutcome {
  /** The callback's answer. */
  callback: { status: number; location: string; body: string };
  /** `name=value` of the session cookie the callback set, if it set one. */
  cookie: string | undefined;
  /** The authorization URL the gateway sent the browser to. */
  authorizationUrl: URL;
}

/**
 * Signs in from a login URL the gateway gave (a step-up redirect's Location,
 * a `stepUp` link), with the gateway cookies of `jar` (the browser's), at an
 * AS whose own cookies are `authorizationServerJar`. Never throws over the
 * outcome: a refused callback is returned as it is.
 * @example const { callback, cookie } = await signInAt(`${h.url}/login?returnTo=%2Fadmin&max_age=5`, { secondFactor: true });
 */
export async function signInAt(
  loginUrl: URL | string,
  opts: { user?: string; secondFactor?: boolean; jar?: CookieJar; authorizationServerJar?: CookieJar; cookieName?: string } = {},
): Promise<SignInOutcome> {
  const jar = opts.jar ?? new CookieJar();
  const login = await jar.fetch(loginUrl);
  await login.arrayBuffer();
  const location = login.headers.get('location');
  if (!isRedirect(login) || location === null) throw new Error(`${String(loginUrl)} answered ${login.status} without a redirect`);
  const authorizationUrl = new URL(location, loginUrl);
  const redirectUri = authorizationUrl.searchParams.get('redirect_uri') ?? new URL('/callback', loginUrl).href;
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, opts.user ?? 'alice', opts.authorizationServerJar, redirectUri, opts.secondFactor ?? false);
  const callback = await jar.fetch(callbackUrl);
  const body = await callback.text();
  const cookieName = opts.cookieName ?? 'session_id';
  const session = callback.headers.getSetCookie().some((cookie) => cookie.startsWith(`${cookieName}=`)) ? jar.get(loginUrl, cookieName) : undefined;
  return {
    callback: { status: callback.status, location: callback.headers.get('location') ?? '', body },
    cookie: session === undefined ? undefined : `${cookieName}=${session}`,
    authorizationUrl,
  };
}
