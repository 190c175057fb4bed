import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';

/**
 * README "What the browser sees" with cookieSameSite: strict: the login cookie stays SameSite=Lax
 * (the callback arrives from the AS's site); the callback answers 200 with
 * an uncacheable HTML page that navigates to returnTo by itself and links to
 * it. With cookieSecure: true both cookies are Secure; with cookieMaxAge: 0
 * the session cookie has no Max-Age (it lasts until the browser closes).
 */
t.test('strict SameSite, Secure, browser-session cookie', async (t) => {
  const h = await startHarness({ config: { session: { cookieSameSite: 'strict', cookieSecure: true, cookieMaxAge: 0 } } });
  t.teardown(() => h.close());

  const signInTo = async (returnTo: string) => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login?returnTo=${encodeURIComponent(returnTo)}`);
    const callback = await jar.fetch(await approveAtAuthorizationServer(new URL(login.headers.get('location')!), 'alice'));
    return { login, callback, jar };
  };

  t.test('the login cookie is SameSite=Lax and Secure whatever the session cookie says', async (t) => {
    const { login } = await signInTo('/');
    const cookie = findSetCookie(login, 'session_id_login');
    t.equal(cookie?.attributes.get('samesite')?.toLowerCase(), 'lax');
    t.ok(cookie?.attributes.has('secure'), 'Secure per cookieSecure: true');
    t.ok(cookie?.attributes.has('httponly'));
    t.ok(Number(cookie?.attributes.get('max-age')) <= 600);
  });

  t.test('the callback answers a page that navigates to returnTo and links to it', async (t) => {
    const { callback, jar } = await signInTo('/dashboard?tab=2&view=list');
    t.equal(callback.status, 200);
    t.equal(callback.headers.get('location'), null, 'no redirect');
    t.match(callback.headers.get('content-type'), /^text\/html/);
    t.equal(callback.headers.get('cache-control'), 'no-store');
    const html = await callback.text();
    t.match(html, /<meta http-equiv="refresh" content="0;url=\/dashboard\?tab=2&amp;view=list">/, 'navigates there by itself');
    t.match(html, /<a class="action" href="\/dashboard\?tab=2&amp;view=list">/, 'and links to it');

    const session = findSetCookie(callback, 'session_id');
    t.ok(session, 'the session cookie comes with the page');
    t.equal(session?.attributes.get('samesite')?.toLowerCase(), 'strict');
    t.ok(session?.attributes.has('secure'), 'Secure per cookieSecure: true');
    t.ok(session?.attributes.has('httponly'));
    t.equal(session?.attributes.get('path'), '/');
    t.notOk(session?.attributes.has('max-age'), 'no Max-Age with cookieMaxAge 0');
    t.notOk(session?.attributes.has('expires'), 'no Expires either');
    const login = findSetCookie(callback, 'session_id_login');
    t.ok(login && isDeletion(login), 'the login cookie is deleted');

    const me = await fetch(`${h.url}/api/me`, { headers: { cookie: `session_id=${jar.get(h.url, 'session_id')}` } });
    t.equal(me.status, 200, 'the session works');
  });

  t.test('returnTo is HTML-escaped in the page', async (t) => {
    const { callback } = await signInTo('/q?x="><script>alert(1)</script>');
    t.equal(callback.status, 200);
    const html = await callback.text();
    t.notMatch(html, /<script/i, 'no script element');
    t.match(html, /href="\/q\?x=&quot;&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;"/, 'the target is escaped, not dropped');
    t.match(callback.headers.get('content-security-policy'), /default-src 'none'/, 'and the page may load nothing');
  });
});
