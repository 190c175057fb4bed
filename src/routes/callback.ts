import * as oidc from 'openid-client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatehouseError, type GatehouseError } from '../errors.js';
import { findByState, PENDING_LOGIN_TTL_MS, type PendingLogin } from '../oauth/pending-login.js';
import { classifyProviderFailure, describeFailure } from '../oauth/provider.js';
import { identify } from '../oauth/identify.js';
import { readTokenResponse } from '../oauth/token-set.js';
import { hashSessionId, newSessionId } from '../session/session-id.js';
import { providerLogoutLinkName } from '../session/ending.js';
import { DEFAULT_PROVIDER, type ProviderClient } from '../oauth/providers.js';
import { emailLinkName, handleLinkName, userLinkName } from '../session/user-links.js';
import { userLock } from '../session/keys.js';
import { sha256Base64url } from '../hash.js';
import { traceAsCall } from '../tracing/tracing.js';
import { escapeHtml } from '../http/page-template.js';
import { siteReturnTo } from '../oauth/return-to.js';
import { handoffUrl } from '../oauth/handoff.js';
import { meetsStepUp, stepUpQuery, type SignInStrength } from '../oauth/step-up.js';

/** A user's sessions beyond this many (oldest first) are ended at the next login. */
const MAX_SESSIONS_PER_USER = 50;
const SINGLE_VALUED = ['code', 'state', 'error', 'iss', 'error_description', 'session_state'];

type CallbackQuery = Record<string, string | string[] | undefined>;

/**
 * GET /callback: the authorization server's answer. The state must belong to
 * a pending login of this browser and is accepted once (on every replica,
 * through the store); then code exchange with the PKCE verifier, ID token
 * validation (nonce, and `iss` per RFC 9207 when advertised) by openid-client,
 * a new session, and the browser is sent to its returnTo. A step-up sign-in
 * (README "Step-up") must also have met the requirement its pending login
 * recorded: `auth_time` within `max_age` (openid-client's check, then the
 * gateway's own without tolerance) and `acr` one of `acr_values`; else 403
 * and no session, whatever the authorization request ended up asking for.
 */
export async function callbackRoute(fastify: FastifyInstance): Promise<void> {
  const { config, providers, pendingLogins, cookies, store, metrics, redirectUri, clock, errorResponse, links, sessionHandles, sites, handoffs } = fastify.gatehouse;
  const ttlMs = config.session.ttl * 1000;
  const loginHref = links.login;

  fastify.get<{ Querystring: CallbackQuery }>(config.paths.callback, { config: { routeClass: 'callback' } }, async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
    const query = request.query;
    if (SINGLE_VALUED.some((name) => Array.isArray(query[name]))) {
      throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'a callback parameter was given more than once' });
    }
    const pendingAll = pendingLogins.read(request.cookies[cookies.loginName]);
    const pending = typeof query.state === 'string' ? findByState(pendingAll, query.state) : undefined;
    if (pending) cookies.setLogin(reply, pendingLogins.write(pendingAll.filter((entry) => entry !== pending)));

    if (query.error !== undefined) {
      metrics.logins.inc({ result: 'denied' });
      request.log.info({ error: String(query.error).slice(0, 64) }, 'sign-in not completed at the authorization server');
      const retry = pending ? `${loginHref}?returnTo=${encodeURIComponent(pending.returnTo)}` : loginHref;
      const reason = query.error === 'access_denied' ? 'sign-in was cancelled.' : 'the authorization server could not complete it.';
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_CALLBACK_DENIED', { detail: reason }), { href: retry, text: 'Try signing in again' });
    }
    // The provider the sign-in started with completes it (README "Several identity providers"); one no longer configured cannot.
    const client = pending === undefined ? undefined : providers.get(pending.provider);
    if (!pending || client === undefined || typeof query.code !== 'string' || !(await claimState(pending.state))) {
      metrics.logins.inc({ result: 'invalid_state' });
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_CALLBACK_STATE'), { href: loginHref, text: 'Sign in again' });
    }
    const { dpop } = client;
    const named = client.name === DEFAULT_PROVIDER ? {} : { provider: client.name };

    // A new key pair for every sign-in (RFC 9449 §5): the new token record replaces the old one, key included.
    const dpopKey = dpop ? await dpop.generate() : undefined;
    const response = await exchangeCode(request, client, pending, dpopKey?.handle);
    const strength = response === undefined ? {} : signInStrength(client, response.tokens);
    if (response === undefined || (pending.stepUp !== undefined && !meetsStepUp(pending.stepUp, strength, clock.now()))) {
      metrics.logins.inc({ result: 'step_up_not_met' });
      request.log.info({ acr: strength.acr?.slice(0, 128), authTime: strength.authTime }, 'step-up not met');
      const retry = `${loginHref}?returnTo=${encodeURIComponent(pending.returnTo)}${stepUpQuery(pending.stepUp ?? {})}`;
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_STEP_UP_NOT_MET'), { href: retry, text: 'Sign in again' });
    }
    // The token type is checked before the token is used for anything (userinfo included).
    const issued = readIssued(request, client, response);
    const identity = await identifyUser(request, client, response, dpopKey?.handle);

    const logoutIds = backchannelLogoutIds(client, response.tokens);
    const sessionId = newSessionId();
    const hash = hashSessionId(sessionId);
    const now = clock.now();
    const expiresAt = now + ttlMs;
    await store.withLock(userLock(identity.userId), async () => {
      const existing = await store.getTokens(identity.userId, true);
      const sessions = liveSessions(existing?.sessions ?? {}, now);
      const evicted = Object.keys(sessions).slice(0, Math.max(0, Object.keys(sessions).length - MAX_SESSIONS_PER_USER + 1));
      for (const old of evicted) delete sessions[old];
      // A new login replaces the user's token record; the user's other sessions share the new tokens (README "Storage").
      await store.saveTokens(
        { userId: identity.userId, ...named, user: identity.user, ...issued, claims: identity.claims, sessions: { ...sessions, [hash]: expiresAt }, ...(dpopKey ? { dpopKey: dpopKey.key } : {}) },
        now,
      );
      await store.saveSession(
        hash,
        {
          userId: identity.userId,
          ...named,
          expiresAt,
          seenAt: now,
          createdAt: now,
          ...(logoutIds.sid === undefined ? {} : { sid: logoutIds.sid }),
          ...(strength.acr === undefined ? {} : { acr: strength.acr }),
          ...(strength.authTime === undefined ? {} : { authTime: strength.authTime }),
        },
        now,
      );
      await Promise.all(evicted.map((old) => store.deleteSession(old)));
    });
    await saveLogoutLinks(client, identity.userId, logoutIds, ttlMs);
    const handle = sessionHandles.of(hash);
    await saveAdministrationLinks(client, identity, handle, ttlMs);
    metrics.logins.inc({ result: 'ok' });
    request.log.info({ userId: identity.user, session: handle }, 'session created');

    // On the sign-in host each provider has its own session cookie (README "Several identity providers").
    cookies.setSession(reply, sessionId, client.name);
    cookies.setSignedIn(reply, true);
    // Signing in for a site: on to it with a one-time code; the site sets its own cookie (README "Several sites").
    const toSite = siteReturnTo(pending.returnTo, sites);
    if (toSite !== undefined) {
      const code = await handoffs.issue({ host: toSite.site.name, userId: identity.userId, signIn: hash, returnTo: toSite.path });
      return reply.redirect(handoffUrl(toSite.site, config.paths.handoff, code), 302);
    }
    return finish(reply, pending.returnTo);
  });

  /**
   * The ID token's `sid` and `sub`, by which a back-channel logout token names
   * the sessions to end (OpenID Connect Back-Channel Logout 1.0 §2.4).
   */
  function backchannelLogoutIds({ provider }: ProviderClient, tokens: NonNullable<Awaited<ReturnType<typeof exchangeCode>>>['tokens']): { sid?: string; sub?: string } {
    const claims = provider.isOpenIdProvider && tokens.id_token !== undefined ? tokens.claims() : undefined;
    return {
      ...(typeof claims?.sid === 'string' && claims.sid.length > 0 ? { sid: claims.sid } : {}),
      ...(typeof claims?.sub === 'string' ? { sub: claims.sub } : {}),
    };
  }

  /** Links `sid` to the user for as long as the session lives; a `sub` needs no link, it is half of the user's key. */
  async function saveLogoutLinks(client: ProviderClient, userId: string, ids: { sid?: string; sub?: string }, ttl: number): Promise<void> {
    if (ids.sid !== undefined) await store.saveLink(providerLogoutLinkName(client.name, ids.sid), userId, ttl);
  }

  /**
   * How the session API and security events find this user and this session
   * (README "Ending sessions"): by the shown user id, by email, by the
   * session's handle; each for as long as the session lives.
   */
  async function saveAdministrationLinks(
    { provider }: ProviderClient,
    identity: { userId: string; user: string; claims: Record<string, unknown> },
    handle: string,
    ttl: number,
  ): Promise<void> {
    const issuer = provider.isOpenIdProvider ? provider.configuration.serverMetadata().issuer : '';
    const email = identity.claims.email;
    await Promise.all([
      store.saveLink(userLinkName(issuer, identity.user), identity.userId, ttl),
      store.saveLink(handleLinkName(handle), identity.userId, ttl),
      ...(typeof email === 'string' && email.length > 0 ? [store.saveLink(emailLinkName(email), identity.userId, ttl)] : []),
    ]);
  }

  /** The validated ID token's `acr` and `auth_time`: how the user signed in (OpenID Connect Core §2). */
  function signInStrength({ provider }: ProviderClient, tokens: NonNullable<Awaited<ReturnType<typeof exchangeCode>>>['tokens']): SignInStrength {
    const claims = provider.isOpenIdProvider && tokens.id_token !== undefined ? tokens.claims() : undefined;
    return {
      ...(typeof claims?.acr === 'string' ? { acr: claims.acr } : {}),
      ...(typeof claims?.auth_time === 'number' && Number.isFinite(claims.auth_time) ? { authTime: claims.auth_time } : {}),
    };
  }

  async function claimState(state: string): Promise<boolean> {
    const key = `state:${sha256Base64url(state)}`;
    return store.claimOnce(key, PENDING_LOGIN_TTL_MS);
  }

  /** The token response's tokens, or GH_ERR_PROVIDER_UNAVAILABLE (503) when its token type is not the one this mode uses. */
  function readIssued(request: FastifyRequest, client: ProviderClient, response: NonNullable<Awaited<ReturnType<typeof exchangeCode>>>) {
    try {
      return readTokenResponse(response.tokens, response.sentAt, config.tokens.defaultLifetime, client.dpop ? 'dpop' : 'bearer');
    } catch (err) {
      metrics.logins.inc({ result: 'provider_unavailable' });
      request.log.warn({ failure: describeFailure(err), tokenType: String(response.tokens.token_type).slice(0, 16) }, 'token response unusable');
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
  }

  /** The token response; undefined when openid-client refused the ID token's `auth_time` against the step-up's `max_age`. */
  async function exchangeCode(request: FastifyRequest, { provider, settings }: ProviderClient, pending: PendingLogin, dpopHandle: oidc.DPoPHandle | undefined) {
    const expectIdToken = provider.isOpenIdProvider && settings.scopes.includes('openid');
    const maxAge = provider.isOpenIdProvider ? pending.stepUp?.maxAge : undefined;
    const configuration = provider.configuration;
    const currentUrl = new URL(redirectUri);
    currentUrl.search = request.url.slice(request.url.indexOf('?'));
    const sentAt = clock.now();
    try {
      const tokens = await traceAsCall('token', () =>
        oidc.authorizationCodeGrant(
          configuration,
          currentUrl,
          {
            pkceCodeVerifier: pending.codeVerifier,
            expectedState: pending.state,
            // Without an issuer the ID token is ignored, so there is no nonce to check in it.
            expectedNonce: provider.isOpenIdProvider ? pending.nonce : undefined,
            idTokenExpected: expectIdToken,
            // OpenID Connect Core §3.1.2.1: with max_age asked, auth_time must be present and recent enough.
            ...(maxAge === undefined ? {} : { maxAge }),
          },
          undefined,
          dpopHandle ? { DPoP: dpopHandle } : undefined,
        ),
      );
      return { tokens, sentAt };
    } catch (err) {
      if (maxAge !== undefined && isAuthTimeRefusal(err)) return undefined;
      throw loginFailure(request, err, 'code exchange failed');
    }
  }

  async function identifyUser(
    request: FastifyRequest,
    { provider, settings }: ProviderClient,
    response: NonNullable<Awaited<ReturnType<typeof exchangeCode>>>,
    dpopHandle: oidc.DPoPHandle | undefined,
  ) {
    let identity;
    try {
      identity = await identify(provider, response.tokens, settings.userIdClaim, dpopHandle);
    } catch (err) {
      throw loginFailure(request, err, 'userinfo failed');
    }
    if (!identity) {
      metrics.logins.inc({ result: 'no_user_id' });
      request.log.warn({ userIdClaim: settings.userIdClaim }, 'sign-in response names no user id');
      throw gatehouseError('GH_ERR_CALLBACK_IDENTITY');
    }
    return identity;
  }

  function loginFailure(request: FastifyRequest, err: unknown, event: string): GatehouseError {
    const failure = describeFailure(err);
    const transient = classifyProviderFailure(err) === 'unreachable';
    metrics.logins.inc({ result: transient ? 'provider_unavailable' : 'rejected' });
    request.log.warn({ failure }, event);
    return gatehouseError(transient ? 'GH_ERR_PROVIDER_UNAVAILABLE' : 'GH_ERR_CALLBACK_REJECTED', { cause: err });
  }

  /**
   * Lax and None cookies travel on a redirect; a Strict one does not when the
   * navigation began on the AS's site, so a page of ours navigates onward.
   */
  function finish(reply: FastifyReply, returnTo: string): FastifyReply {
    if (config.session.cookieSameSite !== 'strict') return reply.redirect(returnTo, 302);
    const { pages } = fastify.gatehouse;
    // A meta refresh, not a script: the page's CSP allows none (README "Pages").
    const page = pages.render({
      page: 'signed-in',
      title: 'Signed in',
      message: 'You are signed in. Taking you back to where you were.',
      action: { href: returnTo, text: 'Continue' },
      head: `<meta http-equiv="refresh" content="0;url=${escapeHtml(returnTo)}">\n`,
    });
    return reply
      .header('content-security-policy', pages.securityPolicy)
      .header('x-content-type-options', 'nosniff')
      .type('text/html; charset=utf-8')
      .send(page);
  }
}

/**
 * Whether openid-client refused the ID token over `auth_time` with `maxAge`
 * given: too old (a timestamp check naming the claim) or missing (an invalid
 * response whose claims lack it). Read from the error's structure, never its text.
 */
/** Claims openid-client requires of every ID token, checked before `auth_time`. */
const ALWAYS_REQUIRED = ['aud', 'exp', 'iat', 'iss', 'sub'];

function isAuthTimeRefusal(err: unknown): boolean {
  for (let current = err, depth = 0; current instanceof Error && depth < 4; current = current.cause, depth += 1) {
    const { code, cause } = current as Error & { code?: unknown; cause?: { claim?: unknown; claims?: Record<string, unknown> } };
    if (code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED' && cause?.claim === 'auth_time') return true;
    if (code === 'OAUTH_INVALID_RESPONSE' && cause?.claims !== undefined && cause.claims.auth_time === undefined && ALWAYS_REQUIRED.every((claim) => cause.claims![claim] !== undefined)) {
      return true;
    }
  }
  return false;
}

function liveSessions(sessions: Record<string, number>, now: number): Record<string, number> {
  return Object.fromEntries(Object.entries(sessions).filter(([, expiresAt]) => expiresAt > now));
}
