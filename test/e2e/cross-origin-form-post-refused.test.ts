import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { keepEvidenceOnFailure, openBrowser, signInThroughBrowser } from './browser.js';

/**
 * SECURITY.md in Chromium: a signed-in user visits a page on another origin whose
 * form posts itself to the gateway. The gateway answers 403 and the upstream
 * never sees the request: from another port of the same host (same site, so
 * the Lax session cookie does travel with it and only the CSRF check stands
 * in the way) and from another site.
 */
t.test('a form on another origin that posts to the gateway is refused', async (t) => {
  const h = await startHarness({ authorizationServerHost: 'localhost' });
  t.teardown(() => h.close());
  const target = `${h.url}/api/echo`;
  const other = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>another origin</title>
<form id="f" method="post" action="${target}"><input name="amount" value="1000"></form>
<script>document.getElementById('f').submit();</script>`);
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));
  const otherPort = (other.address() as AddressInfo).port;
  const { page } = await openBrowser(t);
  await signInThroughBrowser(page, h.url, '/orders', 'alice');

  const origins = [
    { name: 'the same host on another port (same site)', origin: `http://127.0.0.1:${otherPort}`, cookieSent: true },
    { name: 'another site', origin: `http://localhost:${otherPort}`, cookieSent: false },
  ];
  for (const { name, origin, cookieSent } of origins) {
    await t.test(`from ${name}: 403, and nothing reaches the upstream`, async (t) => {
      keepEvidenceOnFailure(t, page);
      const echoesBefore = h.upstream.received.filter((request) => request.url === '/api/echo').length;
      const answered = page.waitForResponse(target);
      await page.goto(`${origin}/`);
      const response = await answered;
      const request = response.request();
      t.equal(request.method(), 'POST', 'the form was posted');
      const sent = await request.allHeaders();
      t.equal(sent.origin, origin, 'with the Origin of the page that posted it');
      if (cookieSent) t.match(sent.cookie, /(^|; )session_id=/, 'and the session cookie (SameSite=Lax allows it within the site)');
      t.equal(response.status(), 403);
      await page.waitForURL(target);
      t.match(await page.locator('body').textContent(), 'Cross-site requests that change data are not allowed.');
      const echoesAfter = h.upstream.received.filter((request) => request.url === '/api/echo').length;
      t.equal(echoesAfter, echoesBefore, 'the upstream never received the POST');
    });
  }

  await t.test('the session still works for the page itself', async (t) => {
    keepEvidenceOnFailure(t, page);
    await page.goto(`${h.url}/orders`);
    const echoed = await page.evaluate(async () => {
      const response = await fetch('/api/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"amount":1}' });
      return response.status;
    });
    t.equal(echoed, 200, 'a same-origin POST goes through');
    t.match(h.upstream.received.at(-1), { method: 'POST', url: '/api/echo', sub: 'alice', body: '{"amount":1}' });
  });
});
