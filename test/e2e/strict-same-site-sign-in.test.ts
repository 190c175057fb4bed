import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { openBrowser, submitLoginForm, upstreamCall, firstOfChain } from './browser.js';

/**
 * README "What the browser sees" with `session.cookieSameSite: strict`, in Chromium and with the AS
 * on another site (localhost vs 127.0.0.1): the redirect chain into the
 * callback began on the AS's site, so a 302 onward would go without the new
 * Strict cookie. The callback answers a page that navigates onward by
 * itself, and the user lands signed in on the page first asked for.
 */
t.test('with SameSite=Strict session cookies, sign-in in a browser lands signed in on returnTo', async (t) => {
  const h = await startHarness({ authorizationServerHost: 'localhost', config: { session: { cookieSameSite: 'strict' } } });
  t.teardown(() => h.close());
  const { context, page } = await openBrowser(t);
  const asOrigin = new URL(h.as.url).origin;
  t.not(new URL(asOrigin).hostname, new URL(h.url).hostname, 'the AS is on another site than the gateway');

  const first = await page.goto(`${h.url}/orders?tab=open`);
  t.equal((await firstOfChain(first!).response())?.status(), 302, 'the gateway sends the browser to sign in');
  await page.waitForURL((url) => url.origin === asOrigin && url.pathname.startsWith('/interaction/'));
  const callbackAnswered = page.waitForResponse((response) => response.url().startsWith(`${h.url}/callback?`));
  await submitLoginForm(page, 'alice');
  const callback = await callbackAnswered;
  t.equal((await callback.request().allHeaders())['sec-fetch-site'], 'cross-site', 'the browser counts the callback as a cross-site navigation');
  t.equal(callback.status(), 200, 'the callback answers a page, not a redirect');

  await page.waitForURL(`${h.url}/orders?tab=open`);
  t.equal(await page.locator('h1').textContent(), 'Signed in as alice', 'the page navigated onward, with the session cookie');
  const me = await upstreamCall(page, 'me');
  t.equal(me.status, 200);
  t.equal(me.body.sub, 'alice');
  const session = (await context.cookies(h.url)).find((cookie) => cookie.name === 'session_id');
  t.equal(session?.sameSite, 'Strict', 'the session cookie is SameSite=Strict');
  t.same(h.upstream.received.map(({ url, sub }) => ({ url, sub })), [{ url: '/orders?tab=open', sub: 'alice' }, { url: '/api/me', sub: 'alice' }]);
});
