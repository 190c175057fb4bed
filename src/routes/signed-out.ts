import type { FastifyInstance } from 'fastify';

/**
 * GET paths.signedOut: where a browser lands after sign-out, when the
 * authorization server sends it back to `provider.postLogoutRedirectUri`
 * pointed here (README "Register gatehouse at your identity provider"). A
 * page of its own, so that signing out ends on "you are signed out" rather
 * than on a protected page that asks to sign in again at once.
 */
export async function signedOutRoute(fastify: FastifyInstance): Promise<void> {
  const { config, links, pages } = fastify.gatehouse;
  const body = pages.render({
    page: 'signed-out',
    title: 'Signed out',
    message: 'You are signed out. The gateway ended your session and forgot its tokens.',
    action: { href: links.login, text: 'Sign in again' },
  });
  fastify.get(config.paths.signedOut, { config: { routeClass: 'logout' } }, async (_request, reply) =>
    reply
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .header('content-security-policy', pages.securityPolicy)
      .type('text/html; charset=utf-8')
      .send(body),
  );
}
