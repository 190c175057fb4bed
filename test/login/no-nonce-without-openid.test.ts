import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';

/** README "What the browser sees": `nonce` is sent when `openid` is in scope, and only then. */
t.test('without openid in scopes, /login sends no nonce and the AS accepts the request', async (t) => {
  const h = await startHarness({ config: { provider: { scopes: ['profile', 'email', 'offline_access'] } } });
  t.teardown(() => h.close());
  const response = await fetch(`${h.url}/login`, { redirect: 'manual' });
  t.equal(response.status, 302);
  const location = new URL(response.headers.get('location')!);
  t.equal(location.searchParams.get('scope'), 'profile email offline_access');
  t.notOk(location.searchParams.has('nonce'), 'no nonce');
  t.equal(location.searchParams.get('code_challenge_method'), 'S256', 'PKCE all the same');
  t.ok(location.searchParams.get('state'), 'state all the same');

  const callback = await approveAtAuthorizationServer(location, 'alice');
  t.ok(callback.searchParams.get('code'), 'the AS issues a code for the plain OAuth 2.0 request');
  t.notOk(callback.searchParams.has('error'));
});
