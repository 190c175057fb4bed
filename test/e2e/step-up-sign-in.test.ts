import t from 'tap';
import { startRoutesHarness } from '../helpers/routes-harness.js';
import { firstOfChain, keepEvidenceOnFailure, openBrowser, submitLoginForm } from './browser.js';

/**
 * README "Step-up", in Chromium against a real AS on another site: signed
 * in with a password only, a navigation to the guarded page goes through a
 * second sign-in (with a one-time code), and lands back on that page, which
 * the upstream then serves; /session shows the stronger acr.
 */
const PASSWORD = 'urn:gatehouse:test:pwd';
const MFA = 'urn:gatehouse:test:mfa';

t.test('in Chromium: a step-up sign-in on the way to a guarded page', async (t) => {
  const h = await startRoutesHarness(
    ({ web, api }) => [
      { path: '/admin', upstream: api.url, stepUp: { acr: [MFA] } },
      { path: '/', upstream: web.url },
    ],
    { authorizationServerHost: 'localhost', signInLevels: { password: PASSWORD, secondFactor: MFA } },
  );
  t.teardown(() => h.close());
  const page = (title: string) => (_req: unknown, res: import('node:http').ServerResponse) =>
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>${title}</title><h1>${title}</h1>`);
  h.web.answer = page('Home');
  h.api.answer = page('Admin panel');
  const asOrigin = new URL(h.as.url).origin;

  const { page: browser } = await openBrowser(t);
  keepEvidenceOnFailure(t, browser);

  // First sign-in: password only.
  await browser.goto(`${h.url}/`);
  t.equal(new URL(browser.url()).origin, asOrigin, 'sent to the AS to sign in');
  await submitLoginForm(browser, 'alice');
  await browser.waitForURL(`${h.url}/`);
  t.equal(await browser.locator('h1').textContent(), 'Home');
  const first = (await browser.evaluate(async () => (await fetch('/session')).json())) as { acr: string };
  t.equal(first.acr, PASSWORD, 'signed in with a password only');

  // The guarded page: the gateway asks for the step-up, the AS asks for the second factor.
  const navigation = await browser.goto(`${h.url}/admin/panel?tab=users`);
  const gatewayAnswer = await firstOfChain(navigation!).response();
  t.equal(gatewayAnswer?.status(), 302, 'the gateway sent the navigation through sign-in');
  t.equal(await gatewayAnswer?.headerValue('location'), `/login?returnTo=${encodeURIComponent('/admin/panel?tab=users')}&acr_values=${encodeURIComponent(MFA)}`);
  t.equal(new URL(browser.url()).origin, asOrigin, "the AS's sign-in page again");
  t.equal(h.api.seen.length, 0, 'nothing reached the admin upstream yet');
  await browser.locator('input[name="login"]').fill('alice');
  await browser.locator('input[name="password"]').fill('any password');
  await browser.locator('input[name="otp"]').fill('123456');
  await browser.locator('button[type="submit"]').click();

  await browser.waitForURL(`${h.url}/admin/panel?tab=users`);
  t.equal(await browser.locator('h1').textContent(), 'Admin panel', 'back at the page, served by its upstream');
  t.equal(h.api.seen.at(-1)?.url, '/admin/panel?tab=users');
  const second = (await browser.evaluate(async () => (await fetch('/session')).json())) as { acr: string; user: { sub: string } };
  t.equal(second.acr, MFA, 'the session now carries the stronger sign-in');
  t.equal(second.user.sub, 'alice');
});
