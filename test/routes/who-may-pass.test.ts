import t from 'tap';
import { forgetSeen, startRoutesHarness } from '../helpers/routes-harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { revokeAtAuthorizationServer, storedTokens } from '../helpers/refresh.js';
import { TestClock } from '../helpers/clock.js';

const NAVIGATION = { 'sec-fetch-mode': 'navigate', accept: 'text/html' };

/**
 * README "Routes" `allow` (email domains, a group in an array claim: 403 page or
 * JSON, nothing upstream, the session kept), 404 for a path no route
 * matches, `onUnauthenticated` (auto, page, 401), the README "What the browser sees" loop guard,
 * and an optional route after a refresh the AS rejects.
 */
t.test('who may pass, and what an unauthenticated request gets', async (t) => {
  const clock = new TestClock();
  const h = await startRoutesHarness(
    ({ web, api, docs }) => [
      { path: '/payments', upstream: api.url, allow: { claims: { groups: ['payments', 'admins'] } } },
      { path: '/staff', upstream: docs.url, allow: { emailDomains: ['example.com'] } },
      { path: '/lenient', upstream: docs.url, allow: { emailDomains: ['Example.COM'], allowUnverifiedEmail: true } },
      { path: '/plain-page', upstream: web.url, onUnauthenticated: 'page' },
      { path: '/plain-401', upstream: web.url, onUnauthenticated: '401' },
      { path: '/maybe', upstream: web.url, auth: 'optional' },
      { path: '/app', upstream: web.url },
    ],
    {
      clock,
      extraClaims: {
        alice: { groups: ['staff', 'admins'] },
        bob: { groups: ['staff'] },
        eve: { email: 'eve@other.example', groups: ['payments'] },
        mallory: { email_verified: false },
        // oauth2-proxy's GHSA-c5c4-8r6x-56w3: a second @, the string "false", no email_verified at all.
        trent: { email: 'trent@evil.example@example.com' },
        sybil: { email_verified: 'false' },
        oscar: { email_verified: undefined },
        peggy: { email: 'Peggy@EXAMPLE.com', email_verified: 'true' },
      },
    },
  );
  t.teardown(() => h.close());
  const [alice, bob, eve, mallory, trent, sybil, oscar, peggy] = await Promise.all(
    ['alice', 'bob', 'eve', 'mallory', 'trent', 'sybil', 'oscar', 'peggy'].map((user) => signIn(h.url, { user })),
  );

  t.test('allow by a group in an array claim and by email domain', async (t) => {
    forgetSeen(h);
    const pass: Array<[string, string]> = [
      ['/payments/1', alice!.cookie],
      ['/payments/1', eve!.cookie],
      ['/staff/1', alice!.cookie],
      ['/staff/1', bob!.cookie],
    ];
    for (const [path, cookie] of pass) t.equal((await fetch(`${h.url}${path}`, { headers: { cookie } })).status, 200, `${path} ${cookie.slice(0, 14)}`);
    t.equal(h.api.seen.length + h.docs.seen.length, 4);
    forgetSeen(h);
    // The third column is how the page must name the user: the `sub` claim
    // (provider.userIdClaim's default), not the display name (`Bob`); with the
    // email, which the rule read, beside it on a route that allows by email domain.
    const refused: Array<[string, string, string]> = [
      ['/payments/1', bob!.cookie, 'bob'],
      ['/staff/1', eve!.cookie, 'eve (eve@other.example)'],
      ['/staff/1', mallory!.cookie, 'mallory (mallory@example.com)'],
    ];
    for (const [path, cookie, userId] of refused) {
      const api = await fetch(`${h.url}${path}`, { headers: { cookie } });
      t.equal(api.status, 403, `${path}: an API call gets 403`);
      t.strictSame(await api.json(), { error: 'forbidden' });
      const page = await httpSend(h.url, { path, headers: { ...NAVIGATION, cookie } });
      t.equal(page.status, 403, `${path}: a navigation gets the 403 page`);
      t.match(page.headers['content-type'], /^text\/html/);
      const body = page.body.toString('utf8');
      t.ok(body.includes(`You are signed in as ${userId}, but`), `the page names the signed-in user, ${userId}`);
      t.match(body, /href="\/logout"/, 'and offers sign-out');
      t.equal(findSetCookie(page.headers['set-cookie'] ?? [], 'session_id'), undefined, 'the session cookie is left alone');
      t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200, 'the session is kept');
    }
    t.equal(h.api.seen.length + h.docs.seen.length, 0, 'nothing reached the upstream');
  });

  t.test('emailDomains: exactly one @, the domain in lower case, email_verified true unless allowUnverifiedEmail', async (t) => {
    const cases: Array<[string, string, number]> = [
      ['/staff/1', peggy!.cookie, 200],
      ['/staff/1', trent!.cookie, 403],
      ['/staff/1', sybil!.cookie, 403],
      ['/staff/1', oscar!.cookie, 403],
      ['/lenient/1', oscar!.cookie, 200],
      ['/lenient/1', alice!.cookie, 200],
      ['/lenient/1', mallory!.cookie, 403],
      ['/lenient/1', sybil!.cookie, 403],
      ['/lenient/1', trent!.cookie, 403],
    ];
    for (const [path, cookie, status] of cases) {
      forgetSeen(h);
      const response = await fetch(`${h.url}${path}`, { headers: { cookie } });
      t.equal(response.status, status, `${path} as ${cookie.slice(0, 14)}: ${status}`);
      t.equal(h.docs.seen.length, status === 200 ? 1 : 0, status === 200 ? 'proxied' : 'nothing reached the upstream');
    }
  });

  t.test('a path no route matches: 404 from the gateway, nothing upstream', async (t) => {
    forgetSeen(h);
    for (const path of ['/', '/nothing', '/paymentsx', '/apps']) {
      const response = await fetch(`${h.url}${path}`, { headers: { cookie: alice!.cookie } });
      t.equal(response.status, 404, path);
      t.match(await response.json(), { error: 'not_found' });
    }
    const page = await httpSend(h.url, { path: '/nothing', headers: NAVIGATION });
    t.equal(page.status, 404);
    t.match(page.headers['content-type'], /^text\/html/);
    t.equal(h.api.seen.length + h.docs.seen.length + h.web.seen.length, 0);
  });

  t.test('onUnauthenticated: auto redirects, page shows the page, 401 answers JSON', async (t) => {
    forgetSeen(h);
    const auto = await httpSend(h.url, { path: '/app/deep?a=1&b=%2F', headers: NAVIGATION });
    t.equal(auto.status, 302);
    t.equal(auto.headers.location, `/login?returnTo=${encodeURIComponent('/app/deep?a=1&b=%2F')}`);
    const events = await httpSend(h.url, { path: '/app/events', headers: { accept: 'text/event-stream' } });
    t.equal(events.status, 401, 'an EventSource request gets 401, never a redirect');
    const page = await httpSend(h.url, { path: '/plain-page/x', headers: NAVIGATION });
    t.equal(page.status, 401);
    t.match(page.body.toString('utf8'), /href="\/login\?returnTo=%2Fplain-page%2Fx"/);
    const json = await httpSend(h.url, { path: '/plain-401/x', headers: NAVIGATION });
    t.equal(json.status, 401, 'a navigation too gets JSON');
    t.strictSame(JSON.parse(json.body.toString('utf8')), { error: 'unauthorized' });
    t.equal(h.web.seen.length, 0, 'nothing upstream');
  });

  t.test('a browser that comes back from sign-in without the session cookie gets a page, not a loop', async (t) => {
    const marker = findSetCookie(alice!.setCookie, 'session_id_signed_in');
    t.ok(marker && Number(marker.attributes.get('max-age')) <= 60, 'the callback marks a completed sign-in for a minute');
    const refused = await httpSend(h.url, { path: '/app/deep?x=1', headers: { ...NAVIGATION, cookie: `session_id_signed_in=${marker!.value}` } });
    t.equal(refused.status, 401, 'no redirect back to sign-in');
    t.match(refused.body.toString('utf8'), /did not keep the session cookie/);
    const stale = await httpSend(h.url, { path: '/app/deep?x=1', headers: { ...NAVIGATION, cookie: `session_id=${'A'.repeat(43)}; session_id_signed_in=1` } });
    t.equal(stale.status, 302, 'a browser that kept a cookie, even a stale one, goes through sign-in');
    const logout = await fetch(`${h.url}/logout`, { headers: { cookie: `${mallory!.cookie}; session_id_signed_in=1` }, redirect: 'manual' });
    const unmarked = findSetCookie(logout, 'session_id_signed_in');
    t.ok(unmarked && isDeletion(unmarked), 'sign-out removes the mark');
  });

  t.test('optional: a refresh the AS rejects ends the session and the request goes on without it', async (t) => {
    const carol = await signIn(h.url, { user: 'carol' });
    await revokeAtAuthorizationServer(h, (await storedTokens(h, 'carol'))!.refreshToken!);
    clock.advance(10 * 60_000);
    forgetSeen(h);
    const response = await fetch(`${h.url}/maybe/x`, { headers: { cookie: carol.cookie } });
    t.equal(response.status, 200, 'proxied anyway');
    const cleared = findSetCookie(response, 'session_id');
    t.ok(cleared && isDeletion(cleared), 'the cookie is cleared');
    t.equal(h.web.seen[0]?.headers.authorization, undefined, 'without a token');
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie: carol.cookie } })).status, 401, 'the session has ended');
    t.equal(await storedTokens(h, 'carol'), null, 'and so has the token record');
  });
});
