import t from 'tap';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { startHarness } from '../helpers/harness.js';
import { TestClock } from '../helpers/clock.js';
import { approveAtAuthorizationServer, signIn, startLogin } from '../helpers/sign-in.js';

/**
 * SECURITY.md: no log line contains a token, a session id, an authorization code
 * or a secret — at debug level, through a login, a refresh, a logout and
 * several failures. Every secret is captured where it is born (the AS's
 * token responses and requests, the callback URL, the Set-Cookie) and the
 * whole log is searched for it.
 */
t.test('a full login, refresh, logout and failure run logs no secret at debug level', async (t) => {
  const clock = new TestClock();
  const h = await startHarness({ accessTokenTtl: 2, clock });
  t.teardown(() => h.close());
  const secrets = new Set<string>([h.clientSecret]);
  h.as.provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const body = ctx.body as Record<string, unknown>;
    for (const name of ['access_token', 'refresh_token', 'id_token']) {
      if (typeof body[name] === 'string') secrets.add(body[name] as string);
    }
    const { code, code_verifier: verifier, refresh_token: usedRefreshToken } = ctx.oidc.params as Record<string, unknown>;
    for (const value of [code, verifier, usedRefreshToken]) if (typeof value === 'string') secrets.add(value);
  });

  // login: the code and state are in the callback URL, the session id in the cookie
  const { loginCookies, authorizationUrl } = await startLogin(h.url, { returnTo: '/api/me' });
  secrets.add(authorizationUrl.searchParams.get('state')!);
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'alice');
  secrets.add(callbackUrl.searchParams.get('code')!);
  const loginCookie = loginCookies[0]!.split(';')[0]!;
  secrets.add(loginCookie.slice(loginCookie.indexOf('=') + 1));
  const callback = await fetch(callbackUrl, { headers: { cookie: loginCookie }, redirect: 'manual' });
  const sessionCookie = callback.headers.getSetCookie().find((value) => value.startsWith('session_id='))!.split(';')[0]!;
  secrets.add(sessionCookie.slice('session_id='.length));
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: sessionCookie } })).status, 200);

  // refresh
  clock.advance(1500);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: sessionCookie } })).status, 200);
  t.ok(h.as.grants.refreshToken >= 1, 'a refresh happened');

  // failures: replayed callback, refresh refused, AS down during refresh
  t.equal((await fetch(callbackUrl, { headers: { cookie: loginCookie }, redirect: 'manual' })).status, 400);
  const bob = await signIn(h.url, { user: 'bob' });
  secrets.add(bob.cookie.slice('session_id='.length));
  clock.advance(1500);
  h.asProxy.mode = 'down';
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 503);
  h.asProxy.mode = 'html400';
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 401);
  h.asProxy.mode = 'up';

  // logout (revocation carries the refresh token to the AS)
  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie: sessionCookie }, redirect: 'manual' })).status, 302);

  const log = h.logText();
  t.ok(log.includes('token refreshed') && log.includes('refresh rejected') && log.includes('session ended'), 'the run was logged');
  t.ok(secrets.size >= 10, `${secrets.size} secret values collected`);
  const leaked = [...secrets].filter((secret) => secret.length >= 8 && log.includes(secret));
  t.same(leaked, [], 'no secret value appears in any log line');
  t.notOk(/[?&](code|state)=/.test(log), 'no query string with code or state is logged');
});
