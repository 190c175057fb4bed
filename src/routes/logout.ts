import * as oidc from 'openid-client';
import type { FastifyInstance, FastifyRequest, RawRequestDefaultExpression } from 'fastify';
import { gatehouseError } from '../errors.js';
import { createCrossSiteCheck } from '../http/csrf.js';
import { describeFailure } from '../oauth/provider.js';
import { resolveSession, type ResolvedSession } from '../plugins/session.js';

/**
 * GET or POST /logout: ends this browser's session, revokes the refresh token
 * (RFC 7009) once no other session of the user remains, and sends the browser
 * to the AS's end-session endpoint (OpenID RP-Initiated Logout) or to `/`.
 * An unknown session still gets its cookie cleared and the redirect.
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
      const resolved = await resolveSession(request);
      const idToken = resolved ? await endSession(request, resolved) : undefined;
      cookies.clearSession(reply);
      reply.header('cache-control', 'no-store');
      const endSessionEndpoint = provider.ready ? provider.configuration.serverMetadata().end_session_endpoint : undefined;
      if (endSessionEndpoint === undefined) return reply.redirect(`${basePath}/`, 302);
      const parameters: Record<string, string> = { post_logout_redirect_uri: postLogoutRedirectUri, client_id: config.provider.clientId };
      if (idToken !== undefined) parameters.id_token_hint = idToken;
      return reply.redirect(oidc.buildEndSessionUrl(provider.configuration, parameters).href, 302);
    },
  });

  /** Removes the session from its user's record; the last one out revokes and deletes the record. Returns the ID token for the hint. */
  async function endSession(request: FastifyRequest, resolved: ResolvedSession): Promise<string | undefined> {
    const { userId } = resolved.session;
    return store.withLock(`user:${userId}`, async () => {
      await store.deleteSession(resolved.hash);
      const record = await store.getTokens(userId, true);
      if (!record) return undefined;
      const { [resolved.hash]: _ended, ...others } = record.sessions;
      const now = Date.now();
      if (Object.values(others).some((expiresAt) => expiresAt > now)) {
        await store.saveTokens({ ...record, sessions: others });
      } else {
        await store.deleteTokens(userId);
        if (record.refreshToken !== undefined) await revoke(request, record.refreshToken);
      }
      request.log.info({ userId }, 'session ended');
      return record.idToken;
    });
  }

  async function revoke(request: FastifyRequest, refreshToken: string): Promise<void> {
    if (!provider.ready || provider.configuration.serverMetadata().revocation_endpoint === undefined) return;
    try {
      await oidc.tokenRevocation(provider.configuration, refreshToken, { token_type_hint: 'refresh_token' });
    } catch (err) {
      request.log.warn({ failure: describeFailure(err) }, 'refresh token revocation failed');
    }
  }
}

/** Discards a request body without reading it into memory. */
function ignoreBody(_request: FastifyRequest, payload: RawRequestDefaultExpression, done: (err: null, body?: undefined) => void): void {
  payload.resume();
  done(null);
}
