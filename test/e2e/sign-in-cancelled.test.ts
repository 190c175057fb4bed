import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { openBrowser, submitLoginForm, upstreamCall, firstOfChain } from './browser.js';

/**
 * README "What the browser sees" `GET /callback?error=...` in Chromium: the user presses Cancel on
 * the AS's login page (oidc-provider's `/interaction/:uid/abort`); the AS
 * returns error=access_denied to the callback, which shows the gateway's
 * "sign-in was cancelled" page with a retry link, makes no token request and
 * sets no session. The retry link then signs in and returns to the page first
 * asked for.
 */
t.test('cancelling at the AS shows the "sign-in was cancelled" page, whose link signs in again', async (t) => {
  const h = await startHarness({ authorizationServerHost: 'localhost' });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { context, page } = await openBrowser(t);
  const asOrigin = new URL(h.as.url).origin;

  const first = await page.goto(`${h.url}/orders`);
  t.equal((await firstOfChain(first!).response())?.status(), 302, 'the gateway sends the browser to sign in');
  await page.waitForURL((url) => url.origin === asOrigin && url.pathname.startsWith('/interaction/'));
  const cancel = page.getByRole('link', { name: '[ Cancel ]' });
  t.match(await cancel.getAttribute('href'), /\/interaction\/[^/]+\/abort$/, "the AS's abort link");
  const callbackAnswered = page.waitForResponse((response) => response.url().startsWith(`${h.url}/callback?`));
  await cancel.click();
  const callback = await callbackAnswered;

  const callbackUrl = new URL(callback.url());
  t.equal(callbackUrl.searchParams.get('error'), 'access_denied', 'the AS sent the browser back with error=access_denied');
  t.equal(callback.status(), 400);
  await page.waitForURL((url) => url.pathname === '/callback');
  t.equal(await page.locator('h1').textContent(), 'Sign-in did not complete');
  t.match(await page.locator('main p').first().textContent(), 'sign-in was cancelled');
  const retry = page.getByRole('link', { name: 'Try signing in again' });
  t.equal(await retry.getAttribute('href'), '/login?returnTo=%2Forders', 'the retry link keeps the page first asked for');
  t.equal(watch.requests, 0, 'no token request');
  t.notOk((await context.cookies(h.url)).some((cookie) => cookie.name === 'session_id'), 'no session cookie');
  t.equal(h.upstream.received.length, 0, 'nothing reached the upstream');

  await retry.click();
  await page.waitForURL((url) => url.origin === asOrigin && url.pathname.startsWith('/interaction/'));
  await submitLoginForm(page, 'alice');
  await page.waitForURL(`${h.url}/orders`);
  t.equal((await upstreamCall(page, 'me')).body.sub, 'alice', 'the retry signs in and lands on the page first asked for');
});
