import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';

/** RFC 6265 §6.1: browsers keep cookies of at least 4,096 bytes (name, value and attributes), and drop larger ones. */
const BROWSER_COOKIE_LIMIT = 4096;

/**
 * README "Limits under abuse": whatever `returnTo` values a hostile page sends the browser to
 * `/login` with, the login cookie stays under 4,096 bytes (oldest pending
 * logins dropped first), so the user's own sign-in still completes.
 */
t.test('long returnTo values never push the login cookie past what a browser keeps', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const jar = new CookieJar();
  const gateway = new URL(h.url);
  let authorizationUrl: URL | undefined;
  let lastReturnTo = '';
  for (const length of [900, 1500, 3000, 5000, 1200, 1200, 1200, 1200]) {
    lastReturnTo = `/${'a'.repeat(length)}`;
    const login = new URL('/login', gateway);
    login.searchParams.set('returnTo', lastReturnTo);
    const response = await jar.fetch(login);
    await response.arrayBuffer();
    t.equal(response.status, 302, `login with a ${length}-byte returnTo redirects`);
    const [setCookie] = response.headers.getSetCookie().filter((value) => value.startsWith('session_id_login='));
    t.ok(setCookie !== undefined && setCookie.length < BROWSER_COOKIE_LIMIT, `the login cookie is ${setCookie?.length} bytes, under 4,096`);
    authorizationUrl = new URL(response.headers.get('location')!);
  }
  // The user's own, newest sign-in completes after the flood.
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl!, 'alice');
  const callback = await jar.fetch(callbackUrl);
  await callback.arrayBuffer();
  t.equal(callback.status, 302, 'the callback of the newest login succeeds');
  t.equal(callback.headers.get('location'), lastReturnTo, 'and returns to its returnTo');
  t.ok(jar.get(gateway, 'session_id'), 'with a session cookie');
});

t.test('a returnTo too long for any cookie falls back to / and the sign-in still completes', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const jar = new CookieJar();
  const login = new URL('/login', h.url);
  login.searchParams.set('returnTo', `/${'b'.repeat(9000)}`);
  const response = await jar.fetch(login);
  await response.arrayBuffer();
  const [setCookie] = response.headers.getSetCookie().filter((value) => value.startsWith('session_id_login='));
  t.ok(setCookie !== undefined && setCookie.length < BROWSER_COOKIE_LIMIT, `the login cookie is ${setCookie?.length} bytes, under 4,096`);
  const callback = await jar.fetch(await approveAtAuthorizationServer(new URL(response.headers.get('location')!), 'alice'));
  await callback.arrayBuffer();
  t.equal(callback.status, 302);
  t.equal(callback.headers.get('location'), '/', 'sent to / instead');
  t.ok(jar.get(h.url, 'session_id'), 'signed in');
});
