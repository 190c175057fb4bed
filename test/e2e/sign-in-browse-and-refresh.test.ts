import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { bearersSeenUpstream, keepEvidenceOnFailure, openBrowser, recordResponses, submitLoginForm, upstreamCall, firstOfChain } from './browser.js';

/**
 * One user's day in Chromium, against a real AS (on another site: localhost)
 * and a real upstream whose page calls the API with fetch(). README "How it works" and "What the browser sees", SECURITY.md:
 * a first visit sent to the AS's sign-in page without a click, sign-in through the AS's login page back to the page
 * first asked for, a JSON POST from the page, silent refresh past the access
 * token's lifetime, and no token ever within the page's reach.
 */
const TOKEN_TTL = 2;
const FIRST_PAGE = '/orders?tab=open';

t.test('in Chromium: sign in, browse, post, outlive the access token, never see a token', async (t) => {
  const h = await startHarness({ accessTokenTtl: TOKEN_TTL, authorizationServerHost: 'localhost' });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { context, page } = await openBrowser(t);
  const responses = recordResponses(context);
  const asOrigin = new URL(h.as.url).origin;

  await t.test('a first visit goes to the AS sign-in page; signing in returns to that page with the upstream data', async (t) => {
    keepEvidenceOnFailure(t, page);
    const first = firstOfChain((await page.goto(`${h.url}${FIRST_PAGE}`))!);
    t.equal((await first.response())?.status(), 302, 'the navigation answered 302');
    t.equal(await (await first.response())?.headerValue('location'), `/login?returnTo=${encodeURIComponent(FIRST_PAGE)}`);
    t.equal(h.upstream.received.length, 0, 'nothing reached the upstream');

    await page.waitForURL((url) => url.origin === asOrigin && url.pathname.startsWith('/interaction/'));
    t.equal(await page.locator('input[name="login"]').count(), 1, "the AS's own login page");
    await submitLoginForm(page, 'alice');

    await page.waitForURL(`${h.url}${FIRST_PAGE}`);
    t.equal(await page.locator('h1').textContent(), 'Signed in as alice', "the upstream's page, for the signed-in user");
    const me = await upstreamCall(page, 'me');
    t.equal(me.status, 200, "the page's fetch('/api/me') answered 200");
    t.match(me.body, { sub: 'alice', client_id: 'gatehouse-test' }, 'with what the upstream saw in the bearer token');
    t.same(
      h.upstream.received.map(({ method, url, sub }) => ({ method, url, sub })),
      [
        { method: 'GET', url: FIRST_PAGE, sub: 'alice' },
        { method: 'GET', url: '/api/me', sub: 'alice' },
      ],
    );
    t.equal(h.as.grants.authorizationCode, 1, 'one code exchange');
  });

  // Each step continues from where the previous one left the browser.
  if (!t.passing()) return;
  await t.test('a JSON POST from the page reaches the upstream and its answer reaches the page', async (t) => {
    keepEvidenceOnFailure(t, page);
    await page.locator('#echo').click();
    const echoed = await upstreamCall(page, 'echoed');
    t.equal(echoed.status, 200);
    t.equal(echoed.body.method, 'POST');
    t.match(JSON.parse(String(echoed.body.body)), { hello: 'upstream' }, 'the JSON body went through unchanged');
    const received = h.upstream.received.at(-1)!;
    t.match(received, { method: 'POST', url: '/api/echo', sub: 'alice', active: true });
    t.equal(received.headers.origin, h.url, 'a same-origin POST, with its Origin');
    t.match(received.headers['content-type'], /^application\/json/);
  });

  if (!t.passing()) return;
  await t.test('past the access token lifetime, a reload and a fetch() work without a new sign-in', async (t) => {
    keepEvidenceOnFailure(t, page);
    for (const step of ['reload', 'fetch'] as const) {
      const refreshes = h.as.grants.refreshToken;
      const usedBefore = bearersSeenUpstream(h.upstream.received).at(-1);
      await sleep(TOKEN_TTL * 1000 + 500);
      let me;
      if (step === 'reload') {
        const reloaded = await page.reload();
        t.equal(reloaded?.status(), 200, 'the reload answered 200');
        t.equal(page.url(), `${h.url}${FIRST_PAGE}`, 'on the same page, no detour through the AS');
        me = await upstreamCall(page, 'me');
      } else {
        me = await page.evaluate(async () => {
          const response = await fetch('/api/me');
          return { status: response.status, body: (await response.json()) as Record<string, unknown> };
        });
      }
      t.equal(me.status, 200, `${step}: /api/me answered 200`);
      t.equal(me.body.sub, 'alice');
      t.ok(h.as.grants.refreshToken > refreshes, `${step}: the gateway refreshed the token`);
      t.not(bearersSeenUpstream(h.upstream.received).at(-1), usedBefore, `${step}: the upstream got a new access token`);
    }
    t.equal(h.as.grants.authorizationCode, 1, 'no new sign-in');
    t.equal(h.as.grants.refreshTokenErrors, 0);
  });

  if (!t.passing()) return;
  await t.test('no token is within the reach of the page: not in document.cookie, not in any response', async (t) => {
    keepEvidenceOnFailure(t, page);
    const session = (await context.cookies(h.url)).find((cookie) => cookie.name === 'session_id');
    t.ok(session, 'the browser holds a session cookie');
    t.equal(session?.httpOnly, true, 'HttpOnly');
    const documentCookie = await page.evaluate(() => document.cookie);
    t.notOk(documentCookie.includes('session_id'), 'document.cookie does not show the session cookie');
    t.notOk(documentCookie.includes(session!.value), 'nor its value');

    await responses.settled();
    const seen = responses.seen;
    const paths = new Set(seen.filter((r) => r.url.startsWith(h.url)).map((r) => new URL(r.url).pathname));
    for (const path of ['/orders', '/login', '/callback', '/api/me', '/api/echo']) t.ok(paths.has(path), `a response of ${path} was seen`);
    t.same(seen.filter((r) => r.body === undefined).map((r) => r.url), [], 'every response body was read');

    const secrets = new Map<string, string>([[h.clientSecret, 'the client secret']]);
    for (const token of bearersSeenUpstream(h.upstream.received)) secrets.set(token, 'an access token');
    for (const { accessToken, refreshToken, idToken, codeVerifier } of watch.issued) {
      if (accessToken) secrets.set(accessToken, 'an access token');
      if (refreshToken) secrets.set(refreshToken, 'a refresh token');
      if (idToken) secrets.set(idToken, 'an ID token');
      if (codeVerifier) secrets.set(codeVerifier, 'the PKCE verifier');
    }
    const kinds = [...secrets.values()];
    t.ok(kinds.filter((kind) => kind === 'a refresh token').length >= 3, 'refresh tokens issued at sign-in and at each refresh');
    t.ok(kinds.includes('an ID token') && kinds.includes('the PKCE verifier'), 'an ID token issued, for a PKCE verifier');
    const leaks = seen.flatMap((response) => {
      const text = `${response.headers}\n${response.body}`;
      return [...secrets]
        .filter(([value]) => text.includes(value) || text.includes(encodeURIComponent(value)))
        .map(([, kind]) => `${kind} in ${response.status} ${response.url}`);
    });
    t.same(leaks, [], `no token or secret in any of the ${seen.length} responses the browser received`);
    const jwtShaped = seen
      .filter((response) => !response.url.startsWith(asOrigin))
      .filter((response) => /eyJ[\w-]*\.[\w-]*\./.test(`${response.headers}\n${response.body}`))
      .map((response) => response.url);
    t.same(jwtShaped, [], 'nothing JWT-shaped in any response that did not come from the AS');
  });
});
