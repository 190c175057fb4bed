import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { openBrowser, signInThroughBrowser, firstOfChain } from './browser.js';

/**
 * README "What the browser sees" `GET /logout` in Chromium: the gateway ends the session and sends
 * the browser to the AS's end-session endpoint; oidc-provider asks the user
 * to confirm, then returns to post_logout_redirect_uri (publicUrl + '/'),
 * where the gateway shows its sign-in page; every protected page does again.
 */
t.test('signing out lands on the configured page and the protected pages ask for sign-in again', async (t) => {
  const h = await startHarness({ authorizationServerHost: 'localhost' });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { context, page } = await openBrowser(t);
  const asOrigin = new URL(h.as.url).origin;
  await signInThroughBrowser(page, h.url, '/orders', 'alice');
  t.ok((await context.cookies(h.url)).some((cookie) => cookie.name === 'session_id'), 'signed in');
  const receivedBefore = h.upstream.received.length;

  await page.goto(`${h.url}/logout`);
  t.equal(new URL(page.url()).origin, asOrigin, "the gateway sent the browser to the AS's end-session endpoint");
  const landed = page.waitForResponse(`${h.url}/`);
  await page.getByRole('button', { name: 'Yes, sign me out' }).click();
  const landing = await landed;
  t.equal(landing.status(), 302, 'back on publicUrl + "/", which now needs a sign-in');
  t.equal(await landing.headerValue('location'), '/login?returnTo=%2F', 'and sends the browser to sign in (README "What the browser sees")');
  await page.waitForURL((url) => url.origin === asOrigin && url.pathname.startsWith('/interaction/'));
  t.equal(await page.locator('input[name="login"]').count(), 1, "the AS asks for a sign-in: the user's AS session ended too");
  t.notOk((await context.cookies(h.url)).some((cookie) => cookie.name === 'session_id'), 'the session cookie is gone');

  const again = firstOfChain((await page.goto(`${h.url}/orders`))!);
  t.equal((await again.response())?.status(), 302, 'the protected page sends the browser to sign in again');
  t.equal(await (await again.response())?.headerValue('location'), '/login?returnTo=%2Forders');
  t.equal(h.upstream.received.length, receivedBefore, 'nothing reached the upstream after sign-out');

  const refreshToken = watch.issued.find((issued) => issued.refreshToken)?.refreshToken;
  t.ok(refreshToken, 'a refresh token had been issued');
  t.equal((await introspect(h.as, refreshToken!, 'refresh_token')).active, false, 'and the AS no longer honours it');
});
