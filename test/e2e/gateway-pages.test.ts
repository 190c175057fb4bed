import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { Response } from 'playwright-core';
import { freePort, startHarness } from '../helpers/harness.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { keepEvidenceOnFailure, openBrowser, submitLoginForm } from './browser.js';

/**
 * README "Pages" in Chromium: each page the gateway renders itself, reached
 * the way a user reaches it, is screenshotted (PNG paths printed below),
 * shows its heading, holds no token, comes with the strict CSP, and that CSP
 * still lets its inline style apply (no violation reported by the browser).
 */
const SHOTS = join(tmpdir(), `gatehouse-pages-${process.pid}`);
mkdirSync(SHOTS, { recursive: true });

t.test('every gateway page: heading, no token, strict CSP, styled, screenshotted', async (t) => {
  const deadUpstream = await freePort();
  const h = await startHarness({
    authorizationServerHost: 'localhost',
    // Short-lived access tokens: the 503 page is what a refresh gets while the authorization server is down.
    accessTokenTtl: 2,
    // `onUnauthenticated: page`: a navigation without a session shows the sign-in page instead of going to the AS.
    config: { routes: [{ path: '/', upstream: `http://127.0.0.1:${deadUpstream}`, onUnauthenticated: 'page' }], pages: { productName: 'Acme Orders' } },
  });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const other = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>another site</title><form id="f" method="post" action="${h.url}/orders"></form><script>document.getElementById('f').submit();</script>`);
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));
  const otherOrigin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;

  const { context, page } = await openBrowser(t);
  const violations: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });

  async function checkPage(t: Test, name: string, response: Response | null, status: number, heading: string): Promise<void> {
    keepEvidenceOnFailure(t, page);
    t.equal(response?.status(), status, `${name}: ${status}`);
    t.equal(await page.locator('h1').textContent(), heading, 'its heading');
    t.equal(await page.locator('header').textContent(), 'Acme Orders', 'the product name');
    const csp = (await response!.allHeaders())['content-security-policy'];
    t.match(csp, /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/, 'the strict CSP');
    t.equal(await page.evaluate(() => getComputedStyle(document.querySelector('main')!).borderRadius), '12px', 'the inline style applied under that CSP');
    t.equal(await page.locator('script, link[rel=stylesheet], img[src^="http"]').count(), 0, 'no script, no external asset');
    const html = await page.content();
    const secrets = [h.clientSecret, ...watch.issued.flatMap((issued) => [issued.accessToken, issued.refreshToken, issued.idToken, issued.codeVerifier])];
    t.same(secrets.filter((secret) => secret !== undefined && html.includes(secret)), [], 'no token anywhere in the page');
    const path = join(SHOTS, `${name}.png`);
    await page.screenshot({ path, fullPage: true });
    t.comment(`screenshot: ${path}`);
    console.log(`screenshot: ${path}`);
  }

  await t.test('sign-in required (401)', async (t) => {
    const response = await page.goto(`${h.url}/orders`);
    if (response?.status() === 401) await checkPage(t, 'sign-in-required', response, 401, 'Sign in required');
    else t.fail(`a navigation without a session answered ${response?.status()}`);
    t.equal(await page.getByRole('link', { name: 'Sign in' }).getAttribute('href'), `/login?returnTo=${encodeURIComponent('/orders')}`);
  });

  await t.test('upstream unreachable (502): could not reach the application', async (t) => {
    await page.goto(`${h.url}/login?returnTo=%2Forders`);
    const landing = page.waitForResponse(`${h.url}/orders`);
    await submitLoginForm(page, 'alice');
    const landed = await landing;
    await page.waitForURL(`${h.url}/orders`);
    await checkPage(t, 'upstream-unreachable', landed, 502, 'Could not reach the application');
    t.match(await page.locator('main p').first().textContent(), /could not reach the application/i);
  });

  await t.test('forbidden (403): a form on another site posts to the gateway', async (t) => {
    const answered = page.waitForResponse(`${h.url}/orders`);
    await page.goto(otherOrigin);
    const response = await answered;
    await page.waitForURL(`${h.url}/orders`);
    await checkPage(t, 'forbidden', response, 403, 'Forbidden');
  });

  await t.test('sign-in cancelled or failed (400)', async (t) => {
    const response = await page.goto(`${h.url}/callback?error=access_denied&state=unknown`);
    await checkPage(t, 'sign-in-failed', response, 400, 'Sign-in did not complete');
    t.ok(await page.getByRole('link', { name: /sign(ing)? in again/i }).isVisible(), 'with a link to sign in again');
  });

  await t.test('service unavailable (503): the access token needs a refresh while the authorization server is down', async (t) => {
    await new Promise((resolve) => setTimeout(resolve, 2500));
    h.asProxy.mode = 'down';
    const response = await page.goto(`${h.url}/orders`);
    await checkPage(t, 'unavailable', response, 503, 'Service unavailable');
    h.asProxy.mode = 'up';
  });

  await t.test('signed out', async (t) => {
    await context.clearCookies();
    const response = await page.goto(`${h.url}/signed-out`);
    await checkPage(t, 'signed-out', response, 200, 'Signed out');
    t.equal(await page.getByRole('link', { name: 'Sign in again' }).getAttribute('href'), '/login');
  });

  t.same(violations, [], 'Chromium reported no CSP violation on any page');
});
