import type { FastifyInstance, FastifyReply } from 'fastify';
import { gatehouseError } from '../errors.js';
import { hashSessionId, newSessionId } from '../session/session-id.js';
import { userLock } from '../session/keys.js';
import { escapeHtml } from '../http/page-template.js';
import { DEFAULT_PROVIDER } from '../oauth/providers.js';

/** Where a refused hand-off sends the browser: sign in again, on the site (which goes to the sign-in host). */
const SIGN_IN_AGAIN = 'Sign in again';

/**
 * GET paths.handoff on a site (README "Several sites"): the one-time code the
 * sign-in host issued for this host becomes the site's own session, linked
 * to the sign-in host's (one logout ends both), and the browser goes on to
 * the path it asked for. A code used twice, on another host, late, or one
 * whose sign-in session has ended gets 400 and no session. Only with `sites`.
 */
export async function handoffRoute(fastify: FastifyInstance): Promise<void> {
  const context = fastify.gatehouse;
  const { config, store, cookies, clock, handoffs, errorResponse, links, sessionHandles } = context;
  if (!context.sites.several) return;

  fastify.get<{ Querystring: Record<string, unknown> }>(config.paths.handoff, { config: { routeClass: 'login' } }, async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
    const site = request.site;
    const code = request.query.code;
    const handoff = site === null || site.signIn ? null : await handoffs.take(code);
    if (handoff === null || handoff.host !== site!.name) {
      request.errorCode = 'GH_ERR_HANDOFF_INVALID';
      request.log.info({ reason: handoff === null ? 'unknown, used, late or malformed' : 'issued for another host' }, 'hand-off refused');
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_HANDOFF_INVALID'), { href: links.login, text: SIGN_IN_AGAIN });
    }
    const now = clock.now();
    const sessionId = newSessionId();
    const hash = hashSessionId(sessionId);
    const created = await store.withLock(userLock(handoff.userId), async () => {
      const signIn = await store.getSession(handoff.signIn, now);
      const tokens = await store.getTokens(handoff.userId, true);
      // Signed out (or ended) between the code and its use: no session from it.
      if (signIn === null || signIn.userId !== handoff.userId || tokens === null || tokens.sessions[handoff.signIn] === undefined) return false;
      // A sign-in with another provider than the site's never becomes a session there (README "Several identity providers").
      if ((signIn.provider ?? DEFAULT_PROVIDER) !== site!.provider) return false;
      const expiresAt = signIn.expiresAt;
      await store.saveTokens({ ...tokens, sessions: { ...tokens.sessions, [hash]: expiresAt } }, now);
      await store.saveSession(
        hash,
        {
          userId: handoff.userId,
          ...(signIn.provider === undefined ? {} : { provider: signIn.provider }),
          expiresAt,
          seenAt: now,
          createdAt: now,
          group: handoff.signIn,
          ...(signIn.sid === undefined ? {} : { sid: signIn.sid }),
          ...(signIn.acr === undefined ? {} : { acr: signIn.acr }),
          ...(signIn.authTime === undefined ? {} : { authTime: signIn.authTime }),
        },
        now,
      );
      return true;
    });
    if (!created) {
      request.errorCode = 'GH_ERR_HANDOFF_INVALID';
      request.log.info({ reason: 'the sign-in session has ended' }, 'hand-off refused');
      return errorResponse.send(request, reply, gatehouseError('GH_ERR_HANDOFF_INVALID'), { href: links.login, text: SIGN_IN_AGAIN });
    }
    request.log.info({ userId: handoff.userId, session: sessionHandles.of(hash), site: site!.name }, 'site session created');
    cookies.setSession(reply, sessionId);
    cookies.setSignedIn(reply, true);
    return finish(reply, handoff.returnTo);
  });

  /** As the callback does: a redirect, or with SameSite=Strict a page that navigates on (the chain began on another site). */
  function finish(reply: FastifyReply, returnTo: string): FastifyReply {
    if (config.session.cookieSameSite !== 'strict') return reply.redirect(returnTo, 302);
    const page = context.pages.render({
      page: 'signed-in',
      title: 'Signed in',
      message: 'You are signed in. Taking you back to where you were.',
      action: { href: returnTo, text: 'Continue' },
      head: `<meta http-equiv="refresh" content="0;url=${escapeHtml(returnTo)}">\n`,
    });
    return reply
      .header('content-security-policy', context.pages.securityPolicy)
      .header('x-content-type-options', 'nosniff')
      .type('text/html; charset=utf-8')
      .send(page);
  }
}
