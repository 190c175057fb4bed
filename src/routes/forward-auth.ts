import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatehouseError, isGatehouseError, type ErrorCode, type GatehouseError } from '../errors.js';
import { AddressList } from '../http/address-list.js';
import { isNavigation } from '../http/request-kind.js';
import { originalRequest } from '../http/original-request.js';
import { safeReturnTo } from '../oauth/return-to.js';
import { resolveSessionId } from '../access/resolve.js';
import { admitFresh, refusedUser, type Admission } from '../access/admission.js';
import { isRequestView, requestView } from '../access/request-view.js';
import type { Site } from '../access/sites.js';
import { UpstreamHeaders, callerIdentity, upstreamAssertion, upstreamToken, withAssertion } from '../access/upstream-identity.js';
import type { Link } from '../http/error-response.js';
import { bearerChallenge, bearerToken, callerForbidden } from '../access/bearer.js';

/** A pass that asserts nothing: a public route, or an optional one without a user. */
const NOTHING_ASSERTED: Readonly<Record<string, string>> = Object.freeze({});
import { sendStepUp, stepUpRefusal } from '../access/step-up.js';

/** Methods a forward-auth request may come with: proxies ask with GET, or with the original method (nginx, Envoy). */
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * `paths.forwardAuth` (README "Behind nginx, Caddy, Traefik or Envoy"): a
 * reverse proxy that keeps routing asks whether the original request may
 * pass and as whom. Exists only with `forwardAuth.trustedProxies`, and
 * answers 404 to every other source, so a browser never reads a token
 * from it. 200 carries `Authorization: Bearer` and the route's identity
 * headers for the proxy to copy upstream; no other status ever carries a
 * token. The original request goes through the same gate as a proxied one
 * (src/access/): its path normalised and routed, its session resolved and
 * refreshed, `allow`, the token and the identity headers.
 */
export async function forwardAuthRoute(fastify: FastifyInstance): Promise<void> {
  const context = fastify.gatehouse;
  const { config, sites, cookies, errorResponse, bearer } = context;
  const { trustedProxies, redirect } = config.forwardAuth;
  if (trustedProxies === undefined) return;
  const proxies = new AddressList(trustedProxies);
  const loginUrl = `${context.site.origin}${context.links.login}`;
  const upstreamHeaders = new UpstreamHeaders(context);

  const endpoint = config.paths.forwardAuth;
  // Envoy's ext_authz asks at `path_prefix` + the original path: the whole subtree is the endpoint's.
  for (const url of [endpoint, `${endpoint}/*`]) {
    fastify.route({
      method: METHODS,
      url,
      config: { routeClass: 'forward-auth' },
      // Before any body is read: the endpoint does not exist for anyone but the proxies.
      onRequest: async (request) => {
        if (!proxies.has(request.socket.remoteAddress)) throw gatehouseError('GH_ERR_ROUTE_NOT_FOUND');
      },
      handler: async (request, reply) => {
        reply.header('cache-control', 'no-store');
        const original = originalRequest(request.raw.headersDistinct, request.method, suffixOf(request.url, endpoint));
        if (!original.ok) return refuse(request, reply, gatehouseError('GH_ERR_REQUEST_INVALID', { detail: original.reason }));
        // The access log names the request that was decided, not only /forward-auth (README "Observe").
        request.decided = original;
        // With `sites`, the original request's host picks the site and its routes (README "Several sites").
        const site = sites.several ? (original.host === null ? null : sites.byHost(original.host ?? request.headers.host)) : context.site;
        if (site === null) return refuse(request, reply, gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'X-Forwarded-Host and X-Original-URL name different hosts' }));
        if (site === undefined) return refuse(request, reply, 'GH_ERR_SITE_UNKNOWN');
        const isCrossSite = site.crossSite;
        // The path rule and the route table, as for a proxied request: the decision is on the path the upstream reads.
        const view = requestView(site.routes, original.url, original.method);
        if (!isRequestView(view)) return refuse(request, reply, view);
        const { route } = view;
        if (route.auth === 'public') return pass(request, reply, NOTHING_ASSERTED);
        if (route.acceptsBearer) {
          // The original request's own Authorization, as the proxy passes it on: a machine client's token decides alone.
          const token = bearerToken(request.headers.authorization);
          if (token !== undefined) {
            let admission;
            try {
              admission = await bearer!.admit(route, token, request.log);
            } catch (err) {
              if (isGatehouseError(err) && (err.code === 'GH_ERR_BEARER_INVALID' || err.code === 'GH_ERR_BEARER_UNAVAILABLE')) return refuse(request, reply, err);
              throw err;
            }
            request.userId = admission.user;
            request.auth = 'bearer';
            if (admission.verdict === 'forbidden') return refuse(request, reply, callerForbidden(admission));
            const identity = await callerIdentity(context, route, admission, context.clock.now());
            return pass(request, reply, upstreamHeaders.asserted({ identity, token: upstreamToken(route, admission), proof: '' }));
          }
          if (!route.acceptsSession) return route.auth === 'optional' ? pass(request, reply, NOTHING_ASSERTED) : refuse(request, reply, 'GH_ERR_BEARER_REQUIRED');
        }
        // The CSRF rule applies to every request that would go upstream with a session (README "Routes").
        if (route.auth === 'required' && isCrossSite(original.method, request.headers)) return refuse(request, reply, 'GH_ERR_CSRF_REJECTED');

        let admission: Admission | null = null;
        let hash = '';
        try {
          const resolved = await resolveSessionId(context, request.cookies[cookies.sessionName], request.log, undefined, site.provider);
          hash = resolved?.hash ?? '';
          if (resolved !== null && route.auth === 'optional' && isCrossSite(original.method, request.headers)) return refuse(request, reply, 'GH_ERR_CSRF_REJECTED');
          if (resolved !== null) admission = await admitFresh(context, route, resolved, request.log);
        } catch (err) {
          // The AS refused the route's token target: answered as `allow` refusals are, the session kept (README "A token for each API").
          if (isGatehouseError(err) && err.code === 'GH_ERR_TOKEN_REFUSED') return refuse(request, reply, err);
          // A refresh the AS rejected has ended the user's sessions: from here on the browser is signed out.
          if (!(isGatehouseError(err) && err.code === 'GH_ERR_SESSION_REQUIRED')) throw err;
        }

        if (admission === null) {
          if (request.cookies[cookies.sessionName] !== undefined) cookies.clearSession(reply);
          if (route.auth === 'optional') return pass(request, reply, NOTHING_ASSERTED);
          if (redirect && (original.method === 'GET' || original.method === 'HEAD') && isNavigation(request)) {
            // publicUrl, never the proxy's X-Forwarded-Host: a foreign host never becomes a redirect target (README "What the browser sees").
            return reply.redirect(`${loginUrl}?returnTo=${encodeURIComponent(returnToOf(site, original.url))}`, 302);
          }
          // The sign-in page's link comes back to the original page, through publicUrl as the redirect does.
          return refuse(request, reply, 'GH_ERR_SESSION_REQUIRED', { href: `${loginUrl}?returnTo=${encodeURIComponent(returnToOf(site, original.url))}`, text: 'Sign in' });
        }
        request.userId = admission.user;
        if (admission.verdict === 'forbidden') return refuse(request, reply, gatehouseError('GH_ERR_NOT_ALLOWED', { detail: refusedUser(route, admission) }), context.links.signOut);
        if (admission.verdict === 'step-up') {
          // As for a proxied request (README "Step-up"), the sign-in URL absolute: the proxy may serve another host.
          const getOrHead = original.method === 'GET' || original.method === 'HEAD';
          const refusal = stepUpRefusal(context.links, route.stepUp!, getOrHead ? safeReturnTo(original.url) : `${context.links.basePath}/`, context.site.origin);
          return sendStepUp(request, reply, errorResponse, refusal, redirect && getOrHead && isNavigation(request) ? 'redirect' : 'json');
        }
        const assertion = upstreamAssertion(context, route, hash, admission, context.clock.now());
        const identity = assertion === undefined ? admission.identity : withAssertion(admission.identity, route, await assertion);
        return pass(request, reply, upstreamHeaders.asserted({ identity, token: upstreamToken(route, admission), proof: '' }));
      },
    });
  }

  /**
   * 200: the request may pass, with `asserted` (token, identity headers) and
   * the `Cookie` the upstream may receive: the browser's cookies without the
   * gateway's own (README "What the upstream receives"), which every recipe
   * copies in place of the browser's header. With none left, no Cookie, and
   * Envoy is told to remove the browser's (ext_authz
   * `x-envoy-auth-headers-to-remove`), since it keeps a header the answer lacks.
   */
  function pass(request: FastifyRequest, reply: FastifyReply, asserted: Record<string, string>): FastifyReply {
    const browser = request.headers.cookie;
    const cookie = browser === undefined ? undefined : cookies.stripOwn(browser);
    if (cookie !== undefined) reply.header('cookie', cookie);
    else if (browser !== undefined) reply.header('x-envoy-auth-headers-to-remove', 'cookie');
    return reply.code(200).headers(asserted).send();
  }

  /**
   * A refusal as proxy mode would answer the original request: the HTML page
   * for a navigation (403 naming the user with sign-out, 401 with a sign-in
   * link), JSON for an API call. Caddy, Traefik and Envoy pass it to the
   * browser; nginx shows its own page for the status, or sends a 401 on to
   * sign-in (README "Behind nginx, Caddy, Traefik or Envoy").
   */
  function refuse(request: FastifyRequest, reply: FastifyReply, error: ErrorCode | GatehouseError, link?: Link): FastifyReply {
    const refusal = typeof error === 'string' ? gatehouseError(error) : error;
    request.errorCode = refusal.code;
    const challenge = bearerChallenge(refusal);
    if (challenge !== undefined) reply.header('www-authenticate', challenge);
    return errorResponse.send(request, reply, refusal, link);
  }
}

/** Where sign-in comes back to: the original path on publicUrl's host, the full URL on a site's (README "Several sites"). */
function returnToOf(site: Site, url: string): string {
  const path = safeReturnTo(url);
  return site.signIn ? path : `${site.origin}${path}`;
}

/** `/api/x?y` of `/forward-auth/api/x?y`; undefined for the endpoint itself. */
function suffixOf(url: string, endpoint: string): string | undefined {
  return url.length > endpoint.length && url[endpoint.length] === '/' ? url.slice(endpoint.length) : undefined;
}
