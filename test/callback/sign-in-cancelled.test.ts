import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { navigate } from '../helpers/navigate.js';
import { denyAtAuthorizationServer, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees", GET /callback?error=...: a 4xx page (navigations) or JSON (API
 * requests) that says sign-in did not complete and offers /login; no token
 * request. The user really presses Cancel at the AS.
 */
t.test('GET /callback?error=...', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  const cancelledLogin = async (returnTo: string) => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login?returnTo=${encodeURIComponent(returnTo)}`);
    const callbackUrl = await denyAtAuthorizationServer(new URL(login.headers.get('location')!));
    return { jar, callbackUrl };
  };

  t.test('the user cancels at the AS: a page says so and offers to sign in again', async (t) => {
    const { jar, callbackUrl } = await cancelledLogin('/orders');
    t.equal(callbackUrl.searchParams.get('error'), 'access_denied', 'the AS reports the cancellation');
    const page = await navigate(callbackUrl, { cookie: jar.header(h.url)! });
    t.equal(page.status, 400);
    t.match(page.headers['content-type'], /^text\/html/);
    t.equal(page.headers['cache-control'], 'no-store');
    t.match(page.body, /did not complete/i);
    t.match(page.body, /cancelled/i);
    t.match(page.body, /<a class="action" href="\/login\?returnTo=%2Forders">/, 'a link to /login that keeps returnTo');
    t.notMatch(page.body, /End-User aborted/, "the AS's error_description is not echoed");
    const cookies = [page.headers['set-cookie'] ?? []].flat();
    t.equal(findSetCookie(cookies, 'session_id'), undefined, 'no session');
    const login = findSetCookie(cookies, 'session_id_login');
    t.ok(login && isDeletion(login), 'the pending login is dropped');
    t.equal(watch.codeExchanges, 0, 'no token request');
  });

  t.test('an API request gets JSON that says so and names /login', async (t) => {
    const { jar, callbackUrl } = await cancelledLogin('/orders');
    const response = await jar.fetch(callbackUrl, { headers: { accept: 'application/json' } });
    t.equal(response.status, 400);
    t.match(response.headers.get('content-type'), /^application\/json/);
    const body = (await response.json()) as Record<string, unknown>;
    t.match(body, { error: 'sign_in_failed', message: /did not complete.*cancelled/i });
    t.ok(
      Object.values(body).some((value) => typeof value === 'string' && /(^|[^\w])\/login\b/.test(value)),
      `the JSON offers /login: ${JSON.stringify(body)}`,
    );
    t.equal(findSetCookie(response, 'session_id'), undefined, 'no session');
    t.equal(watch.codeExchanges, 0, 'no token request');
  });

  t.test('another AS error, or an error without a known state, is a 4xx without the AS text and without a token request', async (t) => {
    const hostile = new URLSearchParams({ error: 'server_error', error_description: '<script>alert("from the AS")</script>' });
    const queries = [`${hostile}&state=unknown`, hostile.toString(), 'error=access_denied', `error=${'x'.repeat(3000)}`];
    for (const query of queries) {
      const page = await navigate(`${h.url}/callback?${query}`);
      t.ok(page.status >= 400 && page.status < 500, `4xx (${page.status})`);
      t.match(page.body, /did not complete/i);
      t.match(page.body, /<a class="action" href="\/login[^"]*">/, 'offers /login');
      t.notMatch(page.body, /<script|from the AS|xxxxxxxx/, 'nothing of the query is echoed');
    }
    t.equal(watch.codeExchanges, 0, 'no token request');
  });
});
