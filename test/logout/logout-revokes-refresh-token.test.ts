import t from 'tap';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees", GET or POST /logout with the user's only session: the session is
 * deleted, the cookie cleared, the refresh token revoked at the AS (proved
 * by the AS's own introspection), then 302 to the end-session endpoint with
 * id_token_hint and post_logout_redirect_uri, which the AS accepts.
 */
t.test('logout of the only session', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const discovery = (await (await fetch(`${h.as.url}/.well-known/openid-configuration`)).json()) as { end_session_endpoint: string };

  const variants: Array<[string, (cookie: string) => Promise<Response>]> = [
    ['GET /logout', (cookie) => fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' })],
    ['POST /logout from a page of the site', (cookie) => fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie, origin: h.url }, redirect: 'manual' })],
  ];
  for (const [name, logout] of variants) {
    t.test(name, async (t) => {
      const user = name.startsWith('GET') ? 'gina' : 'paul';
      const { cookie } = await signIn(h.url, { user });
      const issued = watch.issued.at(-1)!;
      t.ok(issued.refreshToken && issued.idToken, 'the AS issued a refresh token and an ID token');
      t.equal((await introspect(h.as, issued.refreshToken!, 'refresh_token')).active, true, 'the refresh token is alive before logout');

      const response = await logout(cookie);
      t.equal(response.status, 302);
      t.equal(response.headers.get('cache-control'), 'no-store');
      const cleared = findSetCookie(response, 'session_id');
      t.ok(cleared && isDeletion(cleared) && cleared.value === '', 'the session cookie is cleared');
      t.equal(cleared?.attributes.get('path'), '/', 'on the path it was set on');

      t.equal((await introspect(h.as, issued.refreshToken!, 'refresh_token')).active, false, 'the refresh token is revoked at the AS');

      const location = new URL(response.headers.get('location')!);
      t.equal(`${location.origin}${location.pathname}`, discovery.end_session_endpoint, 'to the end-session endpoint');
      t.equal(location.searchParams.get('id_token_hint'), issued.idToken, 'with the ID token as hint');
      t.equal(location.searchParams.get('post_logout_redirect_uri'), `${h.url}/`);
      t.equal(location.searchParams.get('client_id'), CLIENT_ID);
      const endSession = await fetch(location, { redirect: 'manual' });
      t.equal(endSession.status, 200, 'the AS accepts the hint and the post-logout URI (its confirmation page)');
      await endSession.arrayBuffer();

      t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401, 'the old cookie no longer works on /session');
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401, 'nor on a proxied path');
    });
  }

  t.test('a sign-out form may post any body: it is not read', async (t) => {
    const bodies: Array<[string, string]> = [
      ['application/x-www-form-urlencoded', ''],
      ['application/x-www-form-urlencoded', 'csrf=abc&next=%2F'],
      ['multipart/form-data; boundary=b', '--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--b--\r\n'],
      ['application/json', '{"not": "json'],
      ['application/octet-stream', 'x'.repeat(100_000)],
    ];
    for (const [type, body] of bodies) {
      const { cookie } = await signIn(h.url, { user: 'fran' });
      const response = await fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie, origin: h.url, 'content-type': type }, body, redirect: 'manual' });
      t.equal(response.status, 302, `302 for ${type}`);
      t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401, 'signed out');
    }
  });

  t.test("logging out one user leaves another user's session alone", async (t) => {
    const alice = await signIn(h.url, { user: 'alice' });
    const aliceRefresh = watch.issued.at(-1)!.refreshToken!;
    const bob = await signIn(h.url, { user: 'bob' });
    t.equal((await fetch(`${h.url}/logout`, { headers: { cookie: bob.cookie }, redirect: 'manual' })).status, 302);
    const me = await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie } });
    t.equal(me.status, 200);
    t.match(await me.json(), { sub: 'alice' });
    t.equal((await introspect(h.as, aliceRefresh, 'refresh_token')).active, true);
  });
});
