import t from 'tap';
import { freePort } from '../helpers/harness.js';
import { ensureBuilt, spawnCli } from '../helpers/cli-process.js';
import { openBrowser, submitLoginForm, upstreamCall } from './browser.js';

/**
 * README "Run it" `gatehouse demo`, as the README tells a newcomer to run it (`npm
 * run demo` = build, then `node dist/cli.js demo`; GATEHOUSE_DEMO_PORT and
 * GATEHOUSE_DEMO_ADMIN_PORT change the ports): open the URL it prints, sign
 * in as alice, see the upstream's page, sign out.
 */
t.test('gatehouse demo: open the printed URL, sign in as alice, see the upstream page, sign out', async (t) => {
  ensureBuilt();
  const port = await freePort();
  const adminPort = await freePort();
  const demo = spawnCli(['demo'], { GATEHOUSE_DEMO_PORT: String(port), GATEHOUSE_DEMO_ADMIN_PORT: String(adminPort) });
  t.teardown(() => demo.stop());
  const banner = await demo.waitForLog((line) => typeof line.unparsed === 'string' && /^\s*Open\s+http/.test(line.unparsed), 30_000);
  const url = /Open\s+(\S+)/.exec(String(banner.unparsed))![1]!;
  t.equal(url, `http://127.0.0.1:${port}/`, 'the printed URL uses GATEHOUSE_DEMO_PORT');
  t.match(demo.stdout(), /Sign in as\s+any user name \(for example alice\), any password/, 'and says how to sign in');

  const { context, page } = await openBrowser(t);
  const first = await page.goto(url);
  t.equal(first?.status(), 401, 'the first visit shows the sign-in page');
  await page.getByRole('link', { name: 'Sign in' }).click();
  await page.locator('input[name="login"]').waitFor();
  t.not(new URL(page.url()).origin, new URL(url).origin, "on the demo AS's login page");
  await submitLoginForm(page, 'alice');
  await page.waitForURL(url);
  t.equal(await page.locator('h1').textContent(), 'Signed in as alice', "the demo upstream's page");
  const me = await upstreamCall(page, 'me');
  t.equal(me.status, 200);
  t.match(me.body, { sub: 'alice', client_id: 'gatehouse-demo' });
  t.equal(await page.evaluate(() => document.cookie), '', 'no cookie within the reach of the page');

  await page.getByRole('link', { name: '/logout' }).click();
  await page.getByRole('button', { name: 'Yes, sign me out' }).click();
  await page.waitForURL(url);
  t.equal(await page.locator('h1').textContent(), 'Sign in required', 'signed out: back on the sign-in page');
  t.notOk((await context.cookies(url)).some((cookie) => cookie.name === 'session_id'), 'the session cookie is gone');
  const again = await page.reload();
  t.equal(again?.status(), 401);
  t.equal((await demo.stop()).code, 0, 'the demo stops cleanly on a signal');
});
