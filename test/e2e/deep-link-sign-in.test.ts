import t from 'tap';
import type { Page } from 'playwright-core';
import { startHarness } from '../helpers/harness.js';
import { firstOfChain, keepEvidenceOnFailure, openBrowser, submitLoginForm } from './browser.js';

/** A path and a query that must survive the trip through the AS. */
const DEEP_LINK = '/orders/42?tab=open&sort=-date';

/**
 * README "What the browser sees" "no cookie or unknown session id", in Chromium against a real AS
 * on another site: a visit to a deep link goes straight to the AS's sign-in
 * page and comes back to that exact link, with no click on a gatehouse page;
 * a browser that drops the session cookie gets the explanatory page once,
 * not a loop between the gateway and the AS.
 */
t.test('in Chromium: a deep link survives sign-in without a click', async (t) => {
  const h = await startHarness({ authorizationServerHost: 'localhost' });
  t.teardown(() => h.close());
  const asOrigin = new URL(h.as.url).origin;

  await t.test('straight to the AS, and back to the exact link', async (t) => {
    const { page } = await openBrowser(t);
    keepEvidenceOnFailure(t, page);
    const first = await page.goto(`${h.url}${DEEP_LINK}`);
    t.equal(new URL(page.url()).origin, asOrigin, "the first page shown is the AS's");
    t.equal(await page.locator('input[name="login"]').count(), 1, "the AS's login form");
    const start = firstOfChain(first!);
    t.equal(start.url(), `${h.url}${DEEP_LINK}`);
    const answer = await start.response();
    t.equal(answer?.status(), 302, 'the gateway answered the deep link with a redirect');
    t.equal(await answer?.headerValue('location'), `/login?returnTo=${encodeURIComponent(DEEP_LINK)}`);
    t.equal(h.upstream.received.length, 0, 'nothing reached the upstream');

    await submitLoginForm(page, 'alice');
    await page.waitForURL(`${h.url}${DEEP_LINK}`);
    t.equal(await page.locator('h1').textContent(), `The demo upstream received GET ${DEEP_LINK}`, "the upstream's page");
    t.equal(h.upstream.received[0]?.url, DEEP_LINK, 'the upstream received the deep link, path and query');
  });

  await t.test('a browser that drops the session cookie sees the explanatory page, not a loop', async (t) => {
    const { context, page } = await openBrowser(t);
    keepEvidenceOnFailure(t, page);
    await dropSessionCookieBeforeDeepLink(page, h.url);
    const gatewayPaths: string[] = [];
    context.on('request', (request) => {
      const url = new URL(request.url());
      if (url.origin === h.url) gatewayPaths.push(url.pathname);
    });
    await page.goto(`${h.url}${DEEP_LINK}`);
    await submitLoginForm(page, 'bob');
    await page.waitForURL(`${h.url}${DEEP_LINK}`);
    await page.locator('h1').waitFor();
    t.equal(await page.locator('h1').textContent(), 'Sign in required');
    t.match(await page.locator('body').textContent(), /did not keep the session cookie/);
    // Give a loop time to show itself.
    await page.waitForTimeout(1000);
    t.equal(page.url(), `${h.url}${DEEP_LINK}`, 'the browser stays on the page');
    t.equal(gatewayPaths.filter((path) => path === '/login').length, 1, 'one trip to sign-in');
    t.equal(gatewayPaths.filter((path) => path === '/callback').length, 1, 'one callback');
  });
});

/**
 * Makes Chromium behave as a browser that did not keep the session cookie:
 * before each request for the deep link leaves, the `session_id` cookie is
 * deleted from the browser's cookie store (every other cookie, the
 * gateway's sign-in mark included, stays).
 */
async function dropSessionCookieBeforeDeepLink(page: Page, gatewayUrl: string): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  cdp.on('Fetch.requestPaused', async (event: { requestId: string }) => {
    await cdp.send('Network.deleteCookies', { name: 'session_id', url: gatewayUrl });
    await cdp.send('Fetch.continueRequest', { requestId: event.requestId });
  });
  await cdp.send('Network.enable');
  await cdp.send('Fetch.enable', { patterns: [{ urlPattern: `${gatewayUrl}/orders/*`, requestStage: 'Request' }] });
}
