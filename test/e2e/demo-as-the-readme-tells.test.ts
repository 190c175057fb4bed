import t from 'tap';
import { freePort } from '../helpers/harness.js';
import { ensureBuilt, spawnCli } from '../helpers/cli-process.js';
import { keepEvidenceOnFailure, openBrowser, submitLoginForm, upstreamCall } from './browser.js';

/**
 * README "Try it": `gatehouse demo`, as the README tells a newcomer to run it (`npm
 * run demo` = build, then `node dist/cli.js demo`; GATEHOUSE_DEMO_PORT and
 * GATEHOUSE_DEMO_ADMIN_PORT change the ports): open the URL it prints, sign
 * in as alice, read on the page who signed in, what the upstream received
 * and the access token counting down, watch the gateway refresh it, sign out
 * and land on the signed-out page. GATEHOUSE_DEMO_TOKEN_TTL shortens the
 * tokens' lifetime so the refresh comes within seconds.
 */
const TOKEN_TTL = 6;
// A demo process, Chromium and a real refresh: minutes on a busy CI machine.
t.setTimeout(600_000);

t.test('gatehouse demo: sign in, watch a refresh happen on the page, sign out to the signed-out page', async (t) => {
  ensureBuilt();
  const port = await freePort();
  const adminPort = await freePort();
  const demo = spawnCli(['demo'], {
    GATEHOUSE_DEMO_PORT: String(port),
    GATEHOUSE_DEMO_ADMIN_PORT: String(adminPort),
    GATEHOUSE_DEMO_AS_PORT: String(await freePort()),
    GATEHOUSE_DEMO_TOKEN_TTL: String(TOKEN_TTL),
  });
  t.teardown(() => demo.stop());
  const banner = await demo.waitForLog((line) => typeof line.unparsed === 'string' && /^\s*Open\s+http/.test(line.unparsed), 120_000);
  const url = /Open\s+(\S+)/.exec(String(banner.unparsed))![1]!;
  t.equal(url, `http://127.0.0.1:${port}/`, 'the printed URL uses GATEHOUSE_DEMO_PORT');
  t.match(demo.stdout(), /Sign in as\s+any user name \(for example alice\), any password/, 'and says how to sign in');
  t.match(demo.stdout(), new RegExp(`Access tokens live ${TOKEN_TTL} s`), 'and how long access tokens live');

  const { context, page } = await openBrowser(t);
  keepEvidenceOnFailure(t, page);
  const first = await page.goto(url);
  if (first?.status() === 401) await page.getByRole('link', { name: 'Sign in' }).click();
  await page.locator('input[name="login"]').waitFor();
  t.not(new URL(page.url()).origin, new URL(url).origin, "on the demo AS's login page");
  await submitLoginForm(page, 'alice');
  await page.waitForURL(url);

  t.equal(await page.locator('h1').textContent(), 'Signed in as alice', "the demo upstream's page");
  const me = await upstreamCall(page, 'me');
  t.equal(me.status, 200);
  t.match(me.body, { sub: 'alice', client_id: 'gatehouse-demo', refreshes: 0 });
  await page.locator('#name', { hasText: 'Alice' }).waitFor();
  t.equal(await page.locator('#email').textContent(), 'alice@example.com', 'who you are: name and email, from /session');
  const authorization = await page.locator('tr', { hasText: 'Authorization' }).locator('td').textContent();
  t.match(authorization, /^Bearer …\(\d+ characters, never shown\)$/, 'what the upstream received: a bearer token, by its length only');
  t.match(await page.locator('tr', { hasText: 'x-forwarded-proto' }).textContent(), /http$/, 'and the X-Forwarded-* headers the gateway set');
  t.match(await page.locator('tr', { hasText: 'x-forwarded-host' }).textContent(), `127.0.0.1:${port}`);
  t.equal(await page.locator('#document-cookie').textContent(), '""', 'the reminder shows document.cookie: empty');
  t.match(await page.getByRole('note').textContent(), /Your browser never saw a token/);

  const firstCount = Number((await page.locator('#remaining').textContent())!.replace(' s', ''));
  t.ok(firstCount > 0 && firstCount <= TOKEN_TTL, `the access token's remaining lifetime is shown (${firstCount} s)`);
  await page.waitForFunction((start) => Number(document.getElementById('remaining')!.textContent!.replace(' s', '')) < start, firstCount, { timeout: 10_000 });
  t.pass('and counts down');

  await page.locator('#refreshes', { hasText: /^1$/ }).waitFor({ timeout: 30_000 });
  t.match(await page.locator('#refresh-note').textContent(), /The gateway just refreshed the access token/, 'the page says a refresh happened');
  const afterRefresh = await upstreamCall(page, 'me');
  t.match(afterRefresh.body, { sub: 'alice', refreshes: 1 }, 'the upstream saw the refreshed token: no new sign-in');

  const html = await page.content();
  t.notMatch(html, /[A-Za-z0-9_-]{40,}/, 'nothing token-shaped anywhere on the page');

  await page.getByRole('button', { name: 'Call GET /api/me' }).click();
  t.equal((await upstreamCall(page, 'me')).status, 200, 'the button calls the API');

  await page.getByRole('link', { name: 'Sign out' }).click();
  await page.waitForURL(`http://127.0.0.1:${port}/signed-out`);
  t.equal(await page.locator('h1').textContent(), 'Signed out', 'the AS asked nothing and sent the browser to the signed-out page');
  t.notOk((await context.cookies(url)).some((cookie) => cookie.name === 'session_id'), 'the session cookie is gone');
  await page.goto(url);
  t.ok(await page.getByRole('link', { name: 'Sign in' }).or(page.locator('input[name="login"]')).isVisible(), 'the home page asks for a sign-in again');
  t.notMatch(await page.content(), 'Signed in as alice');
  t.equal((await demo.stop()).code, 0, 'the demo stops cleanly on a signal');
});
