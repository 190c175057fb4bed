import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer, signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';

/**
 * README "What the browser sees", GET /callback success and the session cookie paragraph: name
 * session_id, an opaque random value of at least 128 bits, HttpOnly, Path=/,
 * SameSite as configured (lax here), Secure per cookieSecure (auto with an
 * http publicUrl: not Secure), Max-Age per cookieMaxAge; the login cookie is
 * deleted; 302 to returnTo; a new id at every login.
 */
t.test('GET /callback after approval', async (t) => {
  const h = await startHarness({ config: { session: { cookieMaxAge: '2h' } } });
  t.teardown(() => h.close());

  const completeLogin = async (jar: CookieJar, returnTo: string, user = 'alice') => {
    const login = await jar.fetch(`${h.url}/login?returnTo=${encodeURIComponent(returnTo)}`);
    return jar.fetch(await approveAtAuthorizationServer(new URL(login.headers.get('location')!), user));
  };

  t.test('sets the session cookie, deletes the login cookie and redirects to returnTo', async (t) => {
    const jar = new CookieJar();
    const callback = await completeLogin(jar, '/reports?year=2025');
    t.equal(callback.status, 302);
    t.equal(callback.headers.get('location'), '/reports?year=2025');
    t.equal(callback.headers.get('cache-control'), 'no-store');

    const session = findSetCookie(callback, 'session_id');
    t.ok(session, 'a session_id cookie is set');
    const { value, attributes } = session!;
    t.match(value, /^[A-Za-z0-9_-]+$/, 'a bare base64url token');
    t.ok(Buffer.from(value, 'base64url').length * 8 >= 128, `at least 128 bits (${value.length} characters)`);
    t.notOk(value.includes('alice') || value.includes('.'), 'opaque: no user id, not a JWT');
    t.ok(attributes.has('httponly'), 'HttpOnly');
    t.equal(attributes.get('path'), '/', 'Path=/');
    t.equal(attributes.get('samesite')?.toLowerCase(), 'lax', 'SameSite=Lax as configured (the default)');
    t.notOk(attributes.has('secure'), 'not Secure: cookieSecure auto with an http publicUrl');
    t.equal(attributes.get('max-age'), '7200', 'Max-Age from cookieMaxAge 2h');
    t.notOk(attributes.has('domain'), 'host-only');

    const login = findSetCookie(callback, 'session_id_login');
    t.ok(login && isDeletion(login), 'the login cookie is deleted');
    t.equal(login?.attributes.get('path'), '/', 'deleted on the path it was set on');
    t.equal(jar.get(h.url, 'session_id_login'), undefined);

    const me = await fetch(`${h.url}/api/me`, { headers: { cookie: `session_id=${value}` } });
    t.equal(me.status, 200, 'the new cookie works');
    t.match(await me.json(), { sub: 'alice' });
  });

  t.test('without returnTo the browser goes to /', async (t) => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login`);
    const callback = await jar.fetch(await approveAtAuthorizationServer(new URL(login.headers.get('location')!), 'alice'));
    t.equal(callback.status, 302);
    t.equal(callback.headers.get('location'), '/');
  });

  t.test('every login gets a new session id, also when the browser already had one', async (t) => {
    const jar = new CookieJar();
    await completeLogin(jar, '/');
    const first = jar.get(h.url, 'session_id');
    t.ok(first);
    const again = await completeLogin(jar, '/');
    t.equal(again.status, 302);
    const second = jar.get(h.url, 'session_id');
    t.ok(second);
    t.not(second, first, 'signing in again with a session cookie yields a new id (no session fixation)');

    const ids = new Set<string>([first!, second!]);
    for (let i = 0; i < 3; i += 1) ids.add((await signIn(h.url, { user: 'alice' })).cookie.slice('session_id='.length));
    t.equal(ids.size, 5, 'five logins, five ids');
  });
});
