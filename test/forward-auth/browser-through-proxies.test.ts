import { existsSync } from 'node:fs';
import t from 'tap';
import { CHROMIUM, keepEvidenceOnFailure, openBrowser, recordResponses, submitLoginForm, upstreamCall } from '../e2e/browser.js';
import { CADDY, NGINX, proxyMissing, startCaddy, startNginx, type Addresses, type FrontProxy } from './front-proxy.js';
import { startRecipe } from './recipe-scenario.js';

/**
 * README "Behind nginx, Caddy, Traefik or Envoy", as a user meets it: in
 * Chromium, a bookmark on a site behind the recipe's proxy leads to the AS
 * sign-in page (on another site: localhost) and back to the bookmark, whose
 * page then calls the API; no response the browser receives holds a token.
 */
const BOOKMARK = '/orders?tab=open&sort=new';
const chromiumMissing = existsSync(CHROMIUM) || process.env.CI === 'true' ? false : `${CHROMIUM} is not installed (apt-get install chromium)`;

const proxies: Array<[string, (dir: string, addresses: Addresses) => Promise<FrontProxy>, string | false, boolean]> = [
  ['nginx', startNginx, proxyMissing(NGINX, 'nginx'), false],
  ['Caddy', startCaddy, proxyMissing(CADDY, 'caddy'), true],
];

for (const [name, start, missing, redirect] of proxies) {
  t.test(`in Chromium through ${name}: a bookmark, sign-in at the AS, back to the bookmark, never a token`, { skip: missing || chromiumMissing }, async (t) => {
    const { h, proxy, watch } = await startRecipe(t, start, { redirect, tokenTtl: 60, authorizationServerHost: 'localhost' });
    const { context, page } = await openBrowser(t);
    keepEvidenceOnFailure(t, page);
    const responses = recordResponses(context);

    await page.goto(`${proxy.url}${BOOKMARK}`);
    await page.waitForURL((url) => url.origin === new URL(h.as.url).origin && url.pathname.startsWith('/interaction/'));
    t.equal(await page.locator('input[name="login"]').count(), 1, "on the AS's own sign-in page");
    await submitLoginForm(page, 'alice');
    await page.waitForURL(`${proxy.url}${BOOKMARK}`);
    t.equal(await page.locator('h1').textContent(), 'Signed in as alice', "back on the bookmark, the application's page for alice");
    const me = await upstreamCall(page, 'me');
    t.equal(me.status, 200, "the page's fetch('/api/me') through the proxy");
    t.match(me.body, { sub: 'alice' });
    t.ok(h.upstream.received.every((request) => request.active && request.sub === 'alice'), 'every request reached the application with a bearer the AS vouches for');

    await responses.settled();
    const secrets = watch.issued.flatMap((issued) => [issued.accessToken, issued.refreshToken, issued.idToken]).filter((token) => token !== undefined);
    t.ok(secrets.length >= 3, 'tokens were issued');
    const leaks = responses.seen.filter((response) => secrets.some((secret) => `${response.headers}\n${response.body}`.includes(secret!)));
    t.same(leaks.map((response) => response.url), [], `no token in any of the ${responses.seen.length} responses the browser received`);
  });
}
