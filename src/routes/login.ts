import * as oidc from 'openid-client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { safeReturnTo, siteReturnTo } from '../oauth/return-to.js';
import { handoffUrl } from '../oauth/handoff.js';
import { resolveSessionId } from '../access/resolve.js';
import type { Site } from '../access/sites.js';
import type { RouteTable } from '../routing/route-table.js';
import { AddressList } from '../http/address-list.js';
import { originalRequest } from '../http/original-request.js';
import type { PendingLogin } from '../oauth/pending-login.js';
import { authorizationUrl as buildAuthorizationUrl, pushesAuthorization } from '../oauth/pushed-authorization.js';
import { signInAsks } from '../config/token-targets.js';
import { combineStepUp, meetsStepUp, parseStepUp, stepUpParameters, type StepUpRequirement } from '../oauth/step-up.js';
import { gatehouseError } from '../errors.js';
import { DEFAULT_PROVIDER } from '../oauth/providers.js';

/**
 * GET /login: starts the authorization code flow with state, PKCE S256 and,
 * for OpenID scopes, a nonce (RFC 9700 §2.1.1), and binds it to this
 * browser through the sealed login cookie. With PAR (RFC 9126, README
 * "Client authentication and sender-constrained tokens") the parameters are
 * pushed first and the redirect carries only `client_id` and `request_uri`.
 * A step-up (README "Step-up") adds `acr_values`, `max_age` and `prompt`:
 * what the route of `returnTo` asks for, combined with `acr_values` and
 * `max_age` given in the query (an upstream's RFC 9470 challenge), and the
 * pending login keeps it for the callback to verify.
 */
export async function loginRoute(fastify: FastifyInstance): Promise<void> {
  const context = fastify.gatehouse;
  const { config, providers, pendingLogins, cookies, redirectUri, basePath, routes, clock, sites, handoffs, links } = context;
  // Per provider, once: one consent for every API on every site, the targets' resources and scopes asked for at sign-in (README "A token for each API").
  const targets = [...new Map(sites.all.flatMap((site) => site.routes.targets).map((target) => [target.id, target])).values()];
  const asks = new Map(providers.all.map((client) => [client, { ...signInAsks(client.settings.scopes, targets), wantsNonce: client.settings.scopes.includes('openid') }]));
  const defaultReturnTo = `${basePath}/`;
  const trustedProxies = config.forwardAuth.trustedProxies;
  const forwardAuthProxies = trustedProxies === undefined ? undefined : new AddressList(trustedProxies);
  const ownPath = fastify.gatehouse.links.login;

  fastify.get<{ Querystring: Record<string, unknown> }>(config.paths.login, { config: { routeClass: 'login' } }, async (request, reply) => {
    const site = request.site;
    // On a site: sign-in happens on publicUrl's host, and comes back to the full site URL (README "Several sites").
    if (site !== null && !site.signIn) return toSignInHost(request, reply, site);
    const toSite = siteReturnTo(request.query.returnTo, sites);
    const requested = toSite === undefined ? safeReturnTo(request.query.returnTo ?? proxiedReturnTo(request)) : toSite.path;
    const returnTo = toSite !== undefined ? `${toSite.site.origin}${requested}` : requested === '/' ? defaultReturnTo : requested;
    const stepUp = toSite === undefined ? stepUpOf(request.query, returnTo, routes) : stepUpOf(request.query, requested, toSite.site.routes);
    // The provider of the site signed in for; the default provider on the sign-in host itself (README "Several identity providers").
    const client = (toSite === undefined ? undefined : providers.get(toSite.site.provider)) ?? providers.default;
    if (toSite !== undefined) {
      // Signed in here already with that provider (strongly enough for the page): straight on to the site with a hand-off code.
      const resolved = await resolveSessionId(context, request.cookies[cookies.sessionNameOf(client.name)], request.log, undefined, client.name);
      if (resolved !== null && (stepUp === undefined || meetsStepUp(stepUp, resolved.session, clock.now()))) {
        const code = await handoffs.issue({ host: toSite.site.name, userId: resolved.session.userId, signIn: resolved.session.group ?? resolved.hash, returnTo: requested });
        return reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').redirect(handoffUrl(toSite.site, config.paths.handoff, code), 302);
      }
    }
    const configuration = client.provider.configuration;
    const { scope, resources, wantsNonce } = asks.get(client)!;
    const pending: PendingLogin = {
      state: oidc.randomState(),
      codeVerifier: oidc.randomPKCECodeVerifier(),
      nonce: wantsNonce ? oidc.randomNonce() : undefined,
      returnTo,
      ...(client.name === DEFAULT_PROVIDER ? {} : { provider: client.name }),
      ...(stepUp === undefined ? {} : { stepUp }),
      createdAt: clock.now(),
    };
    const parameters = new URLSearchParams({
      redirect_uri: redirectUri,
      scope,
      state: pending.state,
      code_challenge: await oidc.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
    });
    if (pending.nonce !== undefined) parameters.set('nonce', pending.nonce);
    // RFC 8707 §2.1: one `resource` parameter per resource.
    for (const resource of resources) parameters.append('resource', resource);
    if (stepUp !== undefined) for (const [name, value] of Object.entries(stepUpParameters(stepUp))) parameters.set(name, value);
    const authorizationUrl = await buildAuthorizationUrl(configuration, parameters, pushesAuthorization(client.settings.pushedAuthorization, configuration), request.log);

    const earlier = pendingLogins.read(request.cookies[cookies.loginName]);
    cookies.setLogin(reply, pendingLogins.write([...earlier, pending], defaultReturnTo));
    return reply.header('cache-control', 'no-store').redirect(authorizationUrl.href, 302);
  });

  /**
   * The step-up this sign-in asks for: the one of the route `returnTo` leads
   * to (so a browser sent to sign in on its way to a guarded page signs in
   * once, strongly enough), with `acr_values`/`max_age` from the query on
   * top. Matching `returnTo` here only spares a second sign-in; admission
   * checks every request of the session against its route whatever this found.
   */
  function stepUpOf(query: Record<string, unknown>, returnTo: string, table: RouteTable): StepUpRequirement | undefined {
    const given = parseStepUp(query.acr_values, query.max_age);
    if (given === 'invalid') {
      throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'acr_values must be up to 10 acr values separated by spaces, max_age a whole number of seconds' });
    }
    let path = returnTo.startsWith(`${basePath}/`) ? returnTo.slice(basePath.length) : returnTo;
    const queryStart = path.indexOf('?');
    if (queryStart >= 0) path = path.slice(0, queryStart);
    return combineStepUp(table.match(path)?.stepUp, given);
  }

  /**
   * /login asked on a site: the same on publicUrl's host, `returnTo` made the
   * full URL of this site and the step-up parameters kept.
   */
  function toSignInHost(request: FastifyRequest<{ Querystring: Record<string, unknown> }>, reply: FastifyReply, site: Site): FastifyReply {
    const query = new URLSearchParams({ returnTo: `${site.origin}${safeReturnTo(request.query.returnTo ?? proxiedReturnTo(request))}` });
    for (const name of ['acr_values', 'max_age']) {
      const value = request.query[name];
      if (typeof value === 'string') query.set(name, value);
    }
    return reply.header('cache-control', 'no-store').redirect(`${context.site.origin}${links.login}?${query.toString()}`, 302);
  }

  /**
   * Without `returnTo`, from a forward-auth proxy: the original URL it names.
   * nginx sends a refused request to the login path with `error_page 401`,
   * keeping `$request_uri`, and cannot percent-encode it into a query
   * (README "Behind nginx, Caddy, Traefik or Envoy").
   */
  function proxiedReturnTo(request: FastifyRequest): string | undefined {
    if (forwardAuthProxies === undefined || !forwardAuthProxies.has(request.socket.remoteAddress)) return undefined;
    const original = originalRequest(request.raw.headersDistinct, request.method);
    // A browser that asked for the login path itself returns to the default.
    return !original.ok || original.path === ownPath ? undefined : original.url;
  }
}
