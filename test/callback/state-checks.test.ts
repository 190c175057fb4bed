import tap from 'tap';
import { randomBytes } from 'node:crypto';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';
import { findSetCookie } from '../helpers/set-cookie.js';
import { navigate } from '../helpers/navigate.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees": the state must match the pending login of this browser, once,
 * within 10 minutes (expiry: test/login/pending-login.test.ts). Missing,
 * unknown, reused or foreign state: 400, no token request, no session.
 * SECURITY.md: repeated parameters and garbage get a clear 4xx, never a 5xx.
 */
tap.test('GET /callback state checks', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  /** A browser that started a login and was sent back by the AS; the callback is not yet visited. */
  const approvedLogin = async (user = 'alice') => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login?returnTo=/after`);
    const callbackUrl = await approveAtAuthorizationServer(new URL(login.headers.get('location')!), user);
    return { jar, callbackUrl, loginCookie: jar.header(h.url)! };
  };
  const withQuery = (url: URL, edit: (params: URLSearchParams) => void): URL => {
    const copy = new URL(url);
    edit(copy.searchParams);
    return copy;
  };
  /** Asserts a refused callback: 400, no code exchange, no session cookie. */
  const assertRefused = async (t: Pick<typeof tap, 'equal' | 'match'>, response: Response, exchangesBefore: number) => {
    t.equal(response.status, 400, 'status 400');
    t.equal(watch.codeExchanges, exchangesBefore, 'no token request');
    t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie');
    t.match(await response.json(), { error: 'invalid_state' });
  };
  const api = { accept: 'application/json' };

  t.test('a missing or empty state is refused', async (t) => {
    const { jar, callbackUrl } = await approvedLogin();
    const before = watch.codeExchanges;
    await assertRefused(t, await jar.fetch(withQuery(callbackUrl, (p) => p.delete('state')), { headers: api }), before);
    await assertRefused(t, await jar.fetch(withQuery(callbackUrl, (p) => p.set('state', '')), { headers: api }), before);
  });

  t.test('an unknown state is refused', async (t) => {
    const { jar, callbackUrl } = await approvedLogin();
    const before = watch.codeExchanges;
    const forged = withQuery(callbackUrl, (p) => p.set('state', randomBytes(32).toString('base64url')));
    await assertRefused(t, await jar.fetch(forged, { headers: api }), before);
  });

  t.test('a valid state without the login cookie that carries it is refused', async (t) => {
    const { callbackUrl } = await approvedLogin();
    const before = watch.codeExchanges;
    await assertRefused(t, await fetch(callbackUrl, { headers: api, redirect: 'manual' }), before);
    const forgedCookie = { ...api, cookie: `session_id_login=v1.${randomBytes(80).toString('base64url')}` };
    await assertRefused(t, await fetch(callbackUrl, { headers: forgedCookie, redirect: 'manual' }), before);
  });

  t.test("a state from another browser's login is refused, and the victim's login still completes", async (t) => {
    const victim = await approvedLogin('victim');
    const attacker = await approvedLogin('attacker');
    const before = watch.codeExchanges;
    // Login CSRF: the attacker makes the victim's browser (with its own login cookie) load the attacker's callback URL.
    await assertRefused(t, await victim.jar.fetch(attacker.callbackUrl, { headers: api }), before);
    await assertRefused(t, await attacker.jar.fetch(victim.callbackUrl, { headers: api }), before);
    const done = await victim.jar.fetch(victim.callbackUrl);
    t.equal(done.status, 302, "the victim's own callback still succeeds");
    t.ok(findSetCookie(done, 'session_id'));
  });

  t.test('a state accepted once is refused afterwards', async (t) => {
    const { jar, callbackUrl, loginCookie } = await approvedLogin();
    const first = await jar.fetch(callbackUrl);
    t.equal(first.status, 302);
    t.ok(findSetCookie(first, 'session_id'), 'the first use signs in');
    const before = watch.codeExchanges;
    // Replay with the login cookie as it was before the callback (an attacker who copied both).
    await assertRefused(t, await fetch(callbackUrl, { headers: { ...api, cookie: loginCookie }, redirect: 'manual' }), before);
    // And with what the browser holds now (the callback deleted its pending login).
    await assertRefused(t, await jar.fetch(callbackUrl, { headers: api }), before);
  });

  t.test('a repeated code or state is a 400, before anything is exchanged', async (t) => {
    const { jar, callbackUrl } = await approvedLogin();
    const before = watch.codeExchanges;
    const code = callbackUrl.searchParams.get('code')!;
    const state = callbackUrl.searchParams.get('state')!;
    for (const edit of [(p: URLSearchParams) => p.append('code', 'other'), (p: URLSearchParams) => p.append('state', state), (p: URLSearchParams) => p.append('code', code)]) {
      const response = await jar.fetch(withQuery(callbackUrl, edit), { headers: api });
      t.equal(response.status, 400);
      t.match(await response.json(), { error: 'bad_request' });
      t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie');
    }
    t.equal(watch.codeExchanges, before, 'no token request');
    t.equal((await jar.fetch(callbackUrl)).status, 302, 'the genuine callback still completes');
  });

  t.test('a garbage code with a valid state is a 4xx, and the state is used up', async (t) => {
    const { jar, callbackUrl, loginCookie } = await approvedLogin();
    const before = watch.codeExchanges;
    for (const garbage of ['garbage', 'x'.repeat(4000)]) {
      const { jar: fresh, callbackUrl: url } = garbage === 'garbage' ? { jar, callbackUrl } : await approvedLogin();
      const response = await fresh.fetch(withQuery(url, (p) => p.set('code', garbage)), { headers: api });
      t.ok(response.status >= 400 && response.status < 500, `4xx (${response.status}) for a code of ${garbage.length} characters`);
      t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie');
      t.match(await response.json(), { error: 'sign_in_failed' });
    }
    t.equal(watch.codeExchanges, before + 2, 'the AS was asked and refused the garbage codes');
    await assertRefused(t, await fetch(callbackUrl, { headers: { ...api, cookie: loginCookie }, redirect: 'manual' }), before + 2);
  });

  t.test('a response whose iss is not the AS is refused before any token request (RFC 9207 mix-up defence)', async (t) => {
    const { jar, callbackUrl } = await approvedLogin();
    t.equal(callbackUrl.searchParams.get('iss'), h.as.url, 'the AS names itself in the response');
    const before = watch.codeExchanges;
    const response = await jar.fetch(withQuery(callbackUrl, (p) => p.set('iss', 'https://evil.example')), { headers: api });
    t.equal(response.status, 400);
    t.match(await response.json(), { error: 'sign_in_failed' });
    t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie');
    t.equal(watch.codeExchanges, before, 'no token request');
  });

  t.test('the AS unreachable during the code exchange: 503, no session', async (t) => {
    const { jar, callbackUrl } = await approvedLogin();
    h.asProxy.mode = 'down';
    t.teardown(() => {
      h.asProxy.mode = 'up';
    });
    const response = await jar.fetch(callbackUrl, { headers: api });
    t.equal(response.status, 503);
    t.match(await response.json(), { error: 'provider_unavailable' });
    t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie');
  });

  t.test('a refused navigation gets an HTML page offering to sign in again', async (t) => {
    const page = await navigate(`${h.url}/callback?code=x&state=y`);
    t.equal(page.status, 400);
    t.match(page.headers['content-type'], /^text\/html/);
    t.equal(page.headers['cache-control'], 'no-store');
    t.match(page.body, /<a class="action" href="\/login">/);
  });
});
