import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees": /logout without a live session still clears the cookie and
 * redirects. SECURITY.md: a cross-site POST (foreign or `null` Origin, or
 * Sec-Fetch-Site: cross-site) is refused with 403 and changes nothing.
 */
t.test('/logout edge cases', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const endSession = `${h.as.url}/session/end`;

  t.test('without a live session the cookie is still cleared and the browser redirected, without a hint', async (t) => {
    const cookies = [undefined, 'session_id=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'session_id=not-an-id', 'session_id='];
    for (const cookie of cookies) {
      const response = await fetch(`${h.url}/logout`, { headers: cookie ? { cookie } : {}, redirect: 'manual' });
      t.equal(response.status, 302, `302 with cookie ${JSON.stringify(cookie)}`);
      const cleared = findSetCookie(response, 'session_id');
      t.ok(cleared && isDeletion(cleared), 'cookie cleared');
      const location = new URL(response.headers.get('location')!);
      t.equal(`${location.origin}${location.pathname}`, endSession);
      t.notOk(location.searchParams.has('id_token_hint'), 'no hint without a session');
    }
  });

  t.test('a cross-site POST /logout is refused with 403 and the session lives on', async (t) => {
    const { cookie } = await signIn(h.url, { user: 'carol' });
    const refreshToken = watch.issued.at(-1)!.refreshToken!;
    const crossSite: Array<Record<string, string>> = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { origin: h.url.replace('127.0.0.1', 'localhost') },
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'https://evil.example', 'sec-fetch-site': 'same-origin' },
    ];
    for (const headers of crossSite) {
      const response = await fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie, ...headers }, redirect: 'manual' });
      t.equal(response.status, 403, `403 for ${JSON.stringify(headers)}`);
      t.match(await response.json(), { error: 'forbidden' });
      t.equal(findSetCookie(response, 'session_id'), undefined, 'the cookie is not touched');
      t.equal(response.headers.get('location'), null, 'no redirect');
    }
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200, 'the session still works');
    t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, true, 'the refresh token is not revoked');

    const sameSite = await fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie, 'sec-fetch-site': 'same-origin' }, redirect: 'manual' });
    t.equal(sameSite.status, 302, 'a same-origin POST (Sec-Fetch-Site without Origin) signs out');
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401);
  });
});
