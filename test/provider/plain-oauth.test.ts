import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * README "Configuration", a plain OAuth 2.0 server: explicit endpoints instead of an
 * issuer, no discovery; the user is identified once, at the callback, by
 * userinfo; an id_token in the token response is neither validated nor used.
 */
t.test('explicit endpoints without an issuer: login through userinfo, proxy and /session', async (t) => {
  const h = await startHarness({
    config: (as) => ({
      provider: {
        issuer: undefined,
        authorizationEndpoint: `${as.url}/auth`,
        tokenEndpoint: `${as.url}/token`,
        userinfoEndpoint: `${as.url}/me`,
        // oidc-provider's userinfo requires openid; the token response then carries an id_token the gateway must ignore.
        scopes: ['openid', 'email'],
      },
    }),
  });
  t.teardown(() => h.close());

  const { cookie } = await signIn(h.url, { user: 'dora' });
  const proxied = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(proxied.status, 200);
  t.match(await proxied.json(), { sub: 'dora' }, 'the upstream sees a valid token of the user');

  const session = await fetch(`${h.url}/session`, { headers: { cookie } });
  t.equal(session.status, 200);
  const body = (await session.json()) as { user: Record<string, unknown> };
  t.same(body.user, { sub: 'dora', email: 'dora@example.com', email_verified: true }, 'user is the userinfo object, no ID token claims');
  t.equal(h.as.grants.authorizationCode, 1);
});

t.test('a userinfo answer without the user id claim fails the sign-in with a clear error, not a 500', async (t) => {
  const h = await startHarness({
    config: (as) => ({
      provider: {
        issuer: undefined,
        authorizationEndpoint: `${as.url}/auth`,
        tokenEndpoint: `${as.url}/token`,
        userinfoEndpoint: `${as.url}/me`,
        scopes: ['openid'],
        userIdClaim: 'employee_number',
      },
    }),
  });
  t.teardown(() => h.close());
  await t.rejects(signIn(h.url, { user: 'erin' }), /callback answered 502/);
});
