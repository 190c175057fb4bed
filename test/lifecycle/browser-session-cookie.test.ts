import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';

/**
 * README "Configuration": `cookieMaxAge: 0` = the cookie lasts until the browser closes:
 * no Max-Age and no Expires on the session cookie, while the server-side
 * session keeps its `ttl`. Signing out still deletes the cookie.
 */
t.test('cookieMaxAge 0 gives a browser-session cookie', async (t) => {
  const h = await startHarness({ config: { session: { cookieMaxAge: 0, ttl: '1h' } } });
  t.teardown(() => h.close());
  const before = Date.now();
  const { cookie, setCookie } = await signIn(h.url, { user: 'alice' });
  const session = findSetCookie(setCookie, 'session_id');
  t.ok(session, 'the callback sets the session cookie');
  t.notOk(session!.attributes.has('max-age'), 'no Max-Age');
  t.notOk(session!.attributes.has('expires'), 'no Expires');
  t.ok(session!.attributes.has('httponly'), 'HttpOnly');
  t.equal(session!.attributes.get('path'), '/');
  t.equal(session!.attributes.get('samesite')?.toLowerCase(), 'lax');

  const me = await fetch(`${h.url}/session`, { headers: { cookie } });
  t.equal(me.status, 200, 'the session works');
  const { expiresAt } = (await me.json()) as { expiresAt: string };
  const lifetime = Date.parse(expiresAt) - before;
  t.ok(lifetime > 3500_000 && lifetime <= 3600_000 + 1000, 'the server-side session still ends after ttl');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  const logout = await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' });
  const cleared = findSetCookie(logout, 'session_id');
  t.ok(cleared && isDeletion(cleared), 'logout deletes the cookie (Max-Age=0)');
});
