import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LRUCache } from 'lru-cache';
import type { GatewayContext } from '../context.js';
import { gatehouseError, isGatehouseError, type GatehouseError } from '../errors.js';
import { hasBody, isNavigation } from '../http/request-kind.js';
import { resolveCached, resolveStored, type ResolvedSession } from '../access/resolve.js';
import { admit, admitFresh, refusedUser, type Admission } from '../access/admission.js';
import { isRequestView, requestView } from '../access/request-view.js';
import { callerAssertion, callerIdentity, upstreamAssertion, upstreamProof, upstreamToken, upstreamUrl, withAssertion } from '../access/upstream-identity.js';
import type { TokenRecord } from '../session/store.js';
import type { Route } from '../routing/route-table.js';
import type { Exchange } from './request-state.js';
import type { UserSlots } from './user-slots.js';
import { bearerChallenge, bearerToken, callerForbidden, type CallerAdmission } from '../access/bearer.js';
import { tokenHash } from '../machine/bearer-verifier.js';
import { sendStepUp, stepUpRefusal } from '../access/step-up.js';
import type { StepUpRequirement } from '../oauth/step-up.js';

/** The answer to every request without a session on a required route: built once, never thrown (no stack trace per request). */
const NOT_SIGNED_IN = gatehouseError('GH_ERR_SESSION_REQUIRED');
/** A gateway path asked with a method it does not answer (DELETE /login): never proxied. */
const METHOD_NOT_ALLOWED = gatehouseError('GH_ERR_METHOD_NOT_ALLOWED');
/** The answer to a request without a bearer token on a required route that accepts nothing else. */
const NO_BEARER = gatehouseError('GH_ERR_BEARER_REQUIRED');

/** Methods whose request, without a body, can be sent twice: safe and bodiless (RFC 9110 §9.2.1). */
const RETRYABLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export type PreHandler = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;

/**
 * The proxy's preHandler (README "How it works"): the request's view (the
 * route chosen on its normalised path, src/access/request-view.ts), the
 * CSRF check, the session, the token (a refresh only when stale), who may
 * pass, and what goes upstream, all decided by src/access/. A signed-in
 * request whose session and fresh token are in the cache is decided
 * without a promise (the hot path: BENCHMARKS.md); anything that needs the
 * store or the AS goes through `authenticateUser`.
 * @param refusedAfterRetry userKey -> the access token the upstream refused
 * even right after a replacement (src/plugins/proxy.ts): such a request is not retried again.
 * @param gatewayPaths the paths the gateway answers itself: with another method, 405 (they come before every route).
 */
export function createAuthenticate(
  context: GatewayContext,
  slots: UserSlots,
  refusedAfterRetry: LRUCache<string, string>,
  gatewayPaths: ReadonlySet<string>,
): PreHandler {
  const { cookies, refresher, targetTokens, providers, routes, clock, errorResponse, links, bearer } = context;
  /** The cross-site rule for a request of publicUrl's host, or of the site its host chose (README "Several sites"). */
  const isCrossSite = (request: FastifyRequest): boolean => (request.site ?? context.site).crossSite(request.method, request.headers);

  function authenticate(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    const exchange = exchangeOf(request);
    const { route } = exchange;
    if (route.auth !== 'public') {
      const now = clock.now();
      if (route.acceptsBearer) {
        // A machine client's own token decides alone: no session, no CSRF rule (README "Machine clients").
        const token = bearerToken(request.headers.authorization);
        if (token !== undefined) {
          const hash = token === '' ? '' : tokenHash(token);
          const admitted = token === '' ? undefined : bearer!.cached(route, token, hash, now);
          if (admitted === undefined) {
            authenticateCaller(request, reply, exchange, token, hash).then((answered) => {
              if (answered === undefined) exchange.startedAt = process.hrtime.bigint();
              done();
            }, done);
            return;
          }
          if (passCaller(request, reply, exchange, admitted) !== undefined) return;
          proceedWithAssertion(exchange, callerAssertion(context, route, admitted, now), done);
          return;
        }
        if (!route.acceptsSession) {
          if (route.auth === 'required') {
            refuseCaller(request, reply, NO_BEARER);
            return;
          }
          exchange.startedAt = process.hrtime.bigint();
          done();
          return;
        }
      }
      const resolved = resolveCached(context, request.cookies[cookies.sessionName], now, (request.site ?? context.site).provider);
      // A route with a token target is decided here only with its token fresh too (README "A token for each API").
      const target = resolved == null || route.target === undefined ? undefined : targetTokens.peek(resolved.tokens, route.target, now);
      if (resolved == null || !refresher.isFresh(resolved.tokens, now) || (route.target !== undefined && target === undefined)) {
        authenticateUser(request, reply, exchange, resolved, now).then((answered) => {
          if (answered === undefined) exchange.startedAt = process.hrtime.bigint();
          done();
        }, done);
        return;
      }
      if (isCrossSite(request)) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      enter(request, reply, exchange, resolved);
      const admission = admit(route, resolved, resolved.tokens, now, target);
      if (pass(request, reply, exchange, admission, resolved.tokens) !== undefined) return;
      // A DPoP proof is signed synchronously (src/oauth/dpop.ts): it keeps the hot path.
      if (providers.dpop && exchange.token !== '') {
        exchange.proof = upstreamProof(providers, admission.tokens, request.method, upstreamUrl(route, exchange.path), admission.target);
        exchange.dpopKey = admission.tokens.dpopKey;
        exchange.dpopKeys = providers.get(admission.tokens.provider)?.dpop;
      }
      if (route.assertion !== undefined) {
        proceedWithAssertion(exchange, upstreamAssertion(context, route, resolved.hash, admission, now), done);
        return;
      }
    }
    exchange.startedAt = process.hrtime.bigint();
    done();
  }

  /**
   * Adds the route's assertion, when it sends one, and lets the request go
   * upstream. Signed once per session (or caller), route and lifetime: only
   * then does the request wait for a promise.
   */
  function proceedWithAssertion(exchange: Exchange, assertion: string | Promise<string> | undefined, done: (err?: Error) => void): void {
    if (assertion !== undefined && typeof assertion !== 'string') {
      assertion.then((jwt) => {
        exchange.identity = withAssertion(exchange.identity, exchange.route, jwt);
        exchange.startedAt = process.hrtime.bigint();
        done();
      }, done);
      return;
    }
    if (assertion !== undefined) exchange.identity = withAssertion(exchange.identity, exchange.route, assertion);
    exchange.startedAt = process.hrtime.bigint();
    done();
  }

  /** A machine client's token the cache could not decide: verified, then admitted or refused. */
  async function authenticateCaller(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, token: string, hash: string): Promise<FastifyReply | undefined> {
    let admission: CallerAdmission;
    try {
      admission = await bearer!.admit(exchange.route, token, request.log, hash);
    } catch (err) {
      if (isGatehouseError(err) && (err.code === 'GH_ERR_BEARER_INVALID' || err.code === 'GH_ERR_BEARER_UNAVAILABLE')) return refuseCaller(request, reply, err);
      throw err;
    }
    const answered = passCaller(request, reply, exchange, admission);
    if (answered === undefined) exchange.identity = await callerIdentity(context, exchange.route, admission, clock.now());
    return answered;
  }

  /** What goes upstream for an admitted machine client: the 403 when `allow` refuses it, else its identity headers and its own token. */
  function passCaller(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, admission: CallerAdmission): FastifyReply | undefined {
    exchange.userKey = admission.userKey;
    request.userId = admission.user;
    request.auth = 'bearer';
    if (admission.verdict === 'forbidden') return refuseCaller(request, reply, callerForbidden(admission));
    slots.take(request, reply);
    exchange.identity = admission.identity;
    exchange.token = upstreamToken(exchange.route, admission);
    return undefined;
  }

  /** A machine client's refusal: JSON, with the RFC 6750 challenge on a 401. */
  function refuseCaller(request: FastifyRequest, reply: FastifyReply, error: GatehouseError): FastifyReply {
    request.errorCode = error.code;
    const challenge = bearerChallenge(error);
    if (challenge !== undefined) reply.header('www-authenticate', challenge);
    return errorResponse.send(request, reply, error, undefined, 'json');
  }

  /** The request's view and its Exchange; throws the 400 or 404 that ends it. */
  function exchangeOf(request: FastifyRequest): Exchange {
    const view = requestView(request.site === null ? routes : request.site.routes, request.url, request.method);
    if (!isRequestView(view)) throw view;
    if (gatewayPaths.has(view.match)) throw METHOD_NOT_ALLOWED;
    const exchange: Exchange = {
      route: view.route,
      path: view.upstreamPath,
      identity: undefined,
      token: '',
      proof: '',
      startedAt: 0n,
      seconds: -1,
      userKey: '',
      session: null,
      retryable: false,
      retried: false,
      nonceRetried: false,
      dpopKey: undefined,
      dpopKeys: undefined,
      holdsSlot: false,
    };
    request.exchange = exchange;
    return exchange;
  }

  /**
   * Session, token, `allow` and identity headers of a required or optional
   * route, when the cache alone could not decide (`cached` is what it
   * knew); a reply when the request ends here.
   */
  async function authenticateUser(
    request: FastifyRequest,
    reply: FastifyReply,
    exchange: Exchange,
    cached: ResolvedSession | null | undefined,
    now: number,
  ): Promise<FastifyReply | undefined> {
    const { route } = exchange;
    const required = route.auth === 'required';
    const crossSiteRequest = isCrossSite(request);
    if (required && crossSiteRequest) throw gatehouseError('GH_ERR_CSRF_REJECTED');
    const resolved = cached === undefined ? await resolveStored(context, request.cookies[cookies.sessionName]!, request.log, now, (request.site ?? context.site).provider) : cached;
    if (!resolved) {
      if (required) return unauthenticated(request, reply, route);
      if (request.cookies[cookies.sessionName] !== undefined) cookies.clearSession(reply);
      return undefined;
    }
    // The CSRF rule holds for every request proxied with a session (README "Routes").
    if (crossSiteRequest) throw gatehouseError('GH_ERR_CSRF_REJECTED');
    enter(request, reply, exchange, resolved);
    let admission: Admission | null;
    try {
      admission = await admitFresh(context, route, resolved, request.log);
    } catch (err) {
      // The AS refused the route's token target: answered as `allow` refusals are, the session kept (README "A token for each API").
      if (!isGatehouseError(err) || err.code !== 'GH_ERR_TOKEN_REFUSED') throw err;
      request.errorCode = err.code;
      return errorResponse.send(request, reply, err, links.signOut);
    }
    if (admission === null) {
      // An optional route whose session the AS just ended (a rejected refresh) goes on without it.
      cookies.clearSession(reply);
      slots.release(request);
      request.userId = undefined;
      return undefined;
    }
    const answered = pass(request, reply, exchange, admission, resolved.tokens);
    if (answered === undefined && providers.dpop && exchange.token !== '') {
      exchange.proof = upstreamProof(providers, admission.tokens, request.method, upstreamUrl(route, exchange.path), admission.target);
      exchange.dpopKey = admission.tokens.dpopKey;
      exchange.dpopKeys = providers.get(admission.tokens.provider)?.dpop;
    }
    if (answered === undefined && route.assertion !== undefined) {
      const assertion = upstreamAssertion(context, route, resolved.hash, admission, now);
      if (assertion !== undefined) exchange.identity = withAssertion(exchange.identity, route, await assertion);
    }
    return answered;
  }

  /** A signed-in request enters: who it is, and one of its user's `limits.perUserConcurrency` slots (429 when none is left). */
  function enter(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, resolved: ResolvedSession): void {
    exchange.userKey = resolved.session.userId;
    exchange.session = resolved.session;
    request.userId = resolved.tokens.user ?? resolved.session.userId;
    slots.take(request, reply);
  }

  /**
   * What goes upstream for an admitted user: the 403 when `allow` refuses
   * them, else the identity headers and the token. `resolvedTokens` is the
   * record before any refresh: a token issued during this very request is
   * not worth replacing if the upstream refuses it.
   */
  function pass(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, admission: Admission, resolvedTokens: TokenRecord): FastifyReply | undefined {
    if (admission.verdict === 'forbidden') {
      request.errorCode = 'GH_ERR_NOT_ALLOWED';
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_NOT_ALLOWED', { detail: refusedUser(exchange.route, admission) }), links.signOut);
    }
    if (admission.verdict === 'step-up') return stepUp(request, reply, exchange.route.stepUp!);
    exchange.identity = admission.identity;
    exchange.token = upstreamToken(exchange.route, admission);
    if (exchange.token === '') return undefined;
    exchange.retryable =
      admission.tokens === resolvedTokens &&
      RETRYABLE_METHODS.has(request.method) &&
      !hasBody(request) &&
      refusedAfterRetry.peek(exchange.userKey) !== exchange.token;
    return undefined;
  }

  /**
   * A session whose sign-in does not meet `requirement` (README "Step-up"):
   * a GET or HEAD navigation signs in again and comes back; everything else
   * gets 401 with the RFC 9470 challenge and the sign-in URL. The route's
   * `onUnauthenticated` applies as to a request without a session.
   */
  function stepUp(request: FastifyRequest, reply: FastifyReply, requirement: StepUpRequirement): FastifyReply {
    const { route } = request.exchange!;
    const getOrHead = request.method === 'GET' || request.method === 'HEAD';
    const answer = route.onUnauthenticated === '401' || !getOrHead || !isNavigation(request) ? 'json' : route.onUnauthenticated === 'page' ? 'page' : 'redirect';
    const refusal = stepUpRefusal(links, requirement, getOrHead ? `${links.basePath}${request.url}` : `${links.basePath}/`);
    return sendStepUp(request, reply, errorResponse, refusal, answer);
  }

  /**
   * A required route without a session (README "What the browser sees"): a
   * GET or HEAD navigation goes through sign-in and back
   * (`onUnauthenticated: auto`), unless this browser has just signed in and
   * came back without the session cookie: it refused it, and another
   * redirect would loop. Everything else gets 401, JSON or the sign-in page.
   */
  function unauthenticated(request: FastifyRequest, reply: FastifyReply, route: Route): FastifyReply {
    if (route.onUnauthenticated === '401') {
      request.errorCode = NOT_SIGNED_IN.code;
      return errorResponse.send(request, reply, NOT_SIGNED_IN, undefined, 'json');
    }
    if (route.onUnauthenticated === 'page' || (request.method !== 'GET' && request.method !== 'HEAD') || !isNavigation(request)) {
      request.errorCode = NOT_SIGNED_IN.code;
      return errorResponse.send(request, reply, NOT_SIGNED_IN);
    }
    const hasSessionCookie = request.cookies[cookies.sessionName] !== undefined;
    if (!hasSessionCookie && request.cookies[cookies.signedInName] !== undefined) {
      request.errorCode = 'GH_ERR_COOKIE_REFUSED';
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_COOKIE_REFUSED'), links.signInFor(request));
    }
    if (hasSessionCookie) cookies.clearSession(reply);
    const site = request.site;
    // A site's browser signs in on publicUrl's host and comes back to the full site URL (README "Several sites").
    const href = site === null || site.signIn ? links.signIn(`${links.basePath}${request.url}`).href : `${context.site.origin}${links.signIn(`${site.origin}${request.url}`).href}`;
    return reply.header('cache-control', 'no-store').redirect(href, 302);
  }

  return authenticate;
}
