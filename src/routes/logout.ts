import * as oidc from 'openid-client';
import type { FastifyInstance, FastifyRequest, RawRequestDefaultExpression } from 'fastify';
import { gatehouseError } from '../errors.js';
import { resolveSessionId, type ResolvedSession } from '../access/resolve.js';
import { endSessionsAndRevoke } from '../oauth/revocation.js';

/**
 * GET or POST /logout: ends this browser's session, revokes the refresh token
 * (RFC 7009) once no other session of the user remains, and sends the browser
 * to the AS's end-session endpoint (OpenID RP-Initiated Logout) or to `/`.
 * With `?everywhere=1` every session of the user ends (all browsers) and the
 * refresh token is revoked. An unknown session still gets its cookie cleared
 * and the redirect.
 */
export async function logoutRoute(fastify: FastifyInstance): Promise<void> {
  const { config, providers, store, cookies, basePath } = fastify.gatehouse;
  const { sites } = fastify.gatehouse;
  /** The CSRF rule of the request's site (README "Several sites"), publicUrl's without `sites`. */
  const isCrossSite = (request: FastifyRequest): boolean => (request.site ?? fastify.gatehouse.site).crossSite(request.method, request.headers);
  const defaultPostLogout = `${config.server.publicUrl.replace(/\/$/, '')}/`;

  // A sign-out button is usually an HTML form: it posts
  // application/x-www-form-urlencoded or multipart/form-data, which Fastify
  // has no parser for (415). Logout reads nothing from the body, so in this
  // route's own context any body is accepted unread.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', ignoreBody);

  fastify.route({
    method: ['GET', 'POST'],
    url: config.paths.logout,
    config: { routeClass: 'logout' },
    handler: async (request, reply) => {
      if (isCrossSite(request)) throw gatehouseError('GH_ERR_CSRF_REJECTED');
      const everywhere = (request.query as Record<string, string | string[] | undefined>).everywhere;
      if (Array.isArray(everywhere)) throw gatehouseError('GH_ERR_REQUEST_INVALID', { detail: 'everywhere was given more than once' });
      const wantsEverywhere = everywhere === '1' || everywhere === 'true';
      if (wantsEverywhere && !mayEndEverywhere(request)) request.log.info('logout everywhere from a request not shown to be same-origin: this browser only');
      // Every session the browser holds here, one per provider on the sign-in host (README "Several identity providers"):
      // each ends, and each user's last session out is revoked at its own provider.
      let resolved: ResolvedSession | null = null;
      let idToken: string | undefined;
      for (const [provider, name] of cookies.sessionNames) {
        const cookie = request.cookies[name];
        if (cookie === undefined) continue;
        const found = await resolveSessionId(fastify.gatehouse, cookie, request.log);
        if (found !== null) {
          const hint = await endSession(request, found, wantsEverywhere && mayEndEverywhere(request));
          if (resolved === null) [resolved, idToken] = [found, hint];
        }
        cookies.clearSession(reply, provider);
      }
      if (request.cookies[cookies.sessionName] === undefined) cookies.clearSession(reply);
      if (request.cookies[cookies.signedInName] !== undefined) cookies.setSignedIn(reply, false);
      reply.header('cache-control', 'no-store');
      // The end-session endpoint of the provider the session was made with (README "Several identity providers").
      const { provider, settings } = (resolved ? providers.get(resolved.session.provider) : undefined) ?? providers.default;
      const endSessionEndpoint = provider.ready ? provider.configuration.serverMetadata().end_session_endpoint : undefined;
      if (endSessionEndpoint === undefined) return reply.redirect(request.site === null || request.site.signIn ? `${basePath}/` : '/', 302);
      const parameters: Record<string, string> = { post_logout_redirect_uri: settings.postLogoutRedirectUri ?? defaultPostLogout, client_id: settings.clientId };
      if (idToken !== undefined) parameters.id_token_hint = idToken;
      return reply.redirect(oidc.buildEndSessionUrl(provider.configuration, parameters).href, 302);
    },
  });

  /**
   * Whether `everywhere` may end the user's sessions on every device. A link
   * or image on any site can make the browser GET /logout?everywhere=1 with
   * its cookie (SameSite=Lax sends it on top-level navigations), so a GET
   * must show it comes from the site itself: `Sec-Fetch-Site: same-origin`,
   * or `none` (typed in or bookmarked), or, from a browser that sends no
   * fetch metadata, a Referer of publicUrl's origin. A POST got here through
   * the CSRF check above. Anything else signs out only this browser
   * (test/logout/logout-everywhere-cross-site.test.ts).
   */
  function mayEndEverywhere(request: FastifyRequest): boolean {
    if (request.method === 'POST') return true;
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined) return site === 'same-origin' || site === 'none';
    const referer = request.headers.referer;
    if (referer === undefined) return false;
    try {
      return new URL(referer).origin === (request.site ?? fastify.gatehouse.site).origin;
    } catch {
      return false;
    }
  }

  /**
   * Removes the session (or, `everywhere`, all of the user's) from the user's
   * record; the last one out revokes the refresh token and deletes the
   * record. Returns the ID token for the hint.
   */
  async function endSession(request: FastifyRequest, resolved: ResolvedSession, everywhere: boolean): Promise<string | undefined> {
    const { userId } = resolved.session;
    // With `sites`, this browser's sessions on every site end together: the sign-in host's and those handed off from it (README "Several sites").
    const group = resolved.session.group ?? resolved.hash;
    const selected = sites.several
      ? async (hash: string) => everywhere || hash === resolved.hash || hash === group || (await store.getSession(hash))?.group === group
      : (hash: string) => everywhere || hash === resolved.hash;
    const result = await endSessionsAndRevoke({ store, providers }, request.log, userId, resolved.hash, selected);
    if (!result) return undefined;
    request.log.info({ userId: result.record.user ?? userId, sessions: result.ended }, everywhere ? 'every session of the user ended' : 'session ended');
    return result.record.idToken;
  }
}

/** Discards a request body without reading it into memory. */
function ignoreBody(_request: FastifyRequest, payload: RawRequestDefaultExpression, done: (err: null, body?: undefined) => void): void {
  payload.resume();
  done(null);
}
