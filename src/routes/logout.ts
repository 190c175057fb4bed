import * as oidc from 'openid-client';
import type { FastifyInstance, FastifyRequest, RawRequestDefaultExpression } from 'fastify';
import { gatehouseError } from '../errors.js';
import { createCrossSiteCheck } from '../http/csrf.js';
import { revokeRefreshToken } from '../oauth/revocation.js';
import { resolveSession, type ResolvedSession } from '../plugins/session.js';
import { endSessions } from '../session/ending.js';

/**
 * GET or POST /logout: ends this browser's session, revokes the refresh token
 * (RFC 7009) once no other session of the user remains, and sends the browser
 * to the AS's end-session endpoint (OpenID RP-Initiated Logout) or to `/`.
 * With `?everywhere=1` every session of the user ends (all browsers) and the
 * refresh token is revoked. An unknown session still gets its cookie cleared
 * and the redirect.
 */
export async function logoutRoute(fastify: FastifyInstance): Promise<void> {
  const { config, provider, store, cookies, basePath } = fastify.gatehouse;
  const isCrossSite = createCrossSiteCheck(config);
  const postLogoutRedirectUri = config.provider.postLogoutRedirectUri ?? `${config.server.publicUrl.replace(/\/$/, '')}/`;

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
      const resolved = await resolveSession(request);
      const idToken = resolved ? await endSession(request, resolved, everywhere === '1' || everywhere === 'true') : undefined;
      cookies.clearSession(reply);
      reply.header('cache-control', 'no-store');
      const endSessionEndpoint = provider.ready ? provider.configuration.serverMetadata().end_session_endpoint : undefined;
      if (endSessionEndpoint === undefined) return reply.redirect(`${basePath}/`, 302);
      const parameters: Record<string, string> = { post_logout_redirect_uri: postLogoutRedirectUri, client_id: config.provider.clientId };
      if (idToken !== undefined) parameters.id_token_hint = idToken;
      return reply.redirect(oidc.buildEndSessionUrl(provider.configuration, parameters).href, 302);
    },
  });

  /**
   * Removes the session (or, `everywhere`, all of the user's) from the user's
   * record; the last one out revokes the refresh token and deletes the
   * record. Returns the ID token for the hint.
   */
  async function endSession(request: FastifyRequest, resolved: ResolvedSession, everywhere: boolean): Promise<string | undefined> {
    const { userId } = resolved.session;
    await store.deleteSession(resolved.hash);
    const result = await endSessions(store, userId, (hash) => everywhere || hash === resolved.hash);
    if (!result) return undefined;
    if (result.lastOut && result.record.refreshToken !== undefined) await revokeRefreshToken(provider, result.record.refreshToken, request.log);
    request.log.info({ userId, sessions: result.ended }, everywhere ? 'every session of the user ended' : 'session ended');
    return result.record.idToken;
  }
}

/** Discards a request body without reading it into memory. */
function ignoreBody(_request: FastifyRequest, payload: RawRequestDefaultExpression, done: (err: null, body?: undefined) => void): void {
  payload.resume();
  done(null);
}
