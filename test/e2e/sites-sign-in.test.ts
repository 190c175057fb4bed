import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { firstOfChain, keepEvidenceOnFailure, openBrowser, submitLoginForm } from './browser.js';

/**
 * README "Several sites" in Chromium, which resolves `*.localhost` to
 * loopback by itself: a page of app.localhost signs in through the sign-in
 * host auth.localhost and the AS, and lands back on the page with a
 * host-only session cookie of its own (the hand-off); grafana.localhost then
 * signs in without the AS's form, through the sign-in host's session.
 */

/** An upstream that answers with a page naming itself, the path and whether a token came. */
async function pageUpstream(name: string): Promise<ScriptedUpstream> {
  const upstream = await startScriptedUpstream();
  upstream.answer = (req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(`<h1>${name} ${req.url} ${req.headers.authorization?.startsWith('Bearer ') ? 'with a token' : 'without a token'}</h1>`);
  };
  return upstream;
}

t.test('in Chromium: sign-in on a site through the central sign-in host and the hand-off', async (t) => {
  const app = await pageUpstream('app');
  const grafana = await pageUpstream('grafana');
  const h = await startHarness({
    publicHost: 'auth.localhost',
    authorizationServerHost: 'localhost',
    config: {
      sites: [
        { host: 'app.localhost', routes: [{ path: '/', upstream: app.url }] },
        { host: 'grafana.localhost', routes: [{ path: '/', upstream: grafana.url }] },
      ],
    },
  });
  t.teardown(async () => {
    await h.close();
    await Promise.all([app.close(), grafana.close()]);
  });
  const port = new URL(h.url).port;
  const appUrl = `http://app.localhost:${port}/orders/42?tab=open`;
  const grafanaUrl = `http://grafana.localhost:${port}/d/1`;

  const { context, page } = await openBrowser(t);
  keepEvidenceOnFailure(t, page);
  const visited: string[] = [];
  context.on('request', (request) => {
    const url = new URL(request.url());
    if (url.port === port) visited.push(`${url.hostname}${url.pathname}`);
  });

  await page.goto(appUrl);
  t.equal(new URL(page.url()).origin, new URL(h.as.url).origin, "the AS's sign-in page");
  await submitLoginForm(page, 'alice');
  await page.waitForURL(appUrl);
  t.equal(await page.locator('h1').textContent(), 'app /orders/42?tab=open with a token', "back on the site's page, signed in");
  t.strictSame(
    visited.slice(0, 5),
    ['app.localhost/orders/42', 'auth.localhost/login', 'auth.localhost/callback', 'app.localhost/.gatehouse/handoff', 'app.localhost/orders/42'],
    'site, sign-in host, callback, hand-off, site',
  );

  const cookies = await context.cookies();
  const sessions = cookies.filter((cookie) => cookie.name === 'session_id');
  t.strictSame(sessions.map((cookie) => cookie.domain).sort(), ['app.localhost', 'auth.localhost'], 'a session cookie on the site and one on the sign-in host');
  t.ok(
    cookies.every((cookie) => !cookie.domain.startsWith('.')),
    'every cookie host-only (no Domain attribute)',
  );
  t.not(sessions[0]!.value, sessions[1]!.value, 'two sessions');

  visited.length = 0;
  await page.goto(grafanaUrl);
  await page.waitForURL(grafanaUrl);
  t.equal(await page.locator('h1').textContent(), 'grafana /d/1 with a token', 'grafana signed in without the AS');
  t.strictSame(visited, ['grafana.localhost/d/1', 'auth.localhost/login', 'grafana.localhost/.gatehouse/handoff', 'grafana.localhost/d/1']);

  await page.goto(`http://app.localhost:${port}/logout`);
  const again = await page.goto(grafanaUrl);
  const first = await firstOfChain(again!).response();
  t.equal(first?.status(), 302, 'signing out on app signed grafana out too: its page sends the browser to sign in again');
  t.equal(new URL((await first?.headerValue('location')) ?? '').host, `auth.localhost:${port}`);
});
