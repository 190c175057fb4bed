import t, { type Test } from 'tap';
import { startHarness, type Harness } from '../helpers/harness.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { SitesBrowser } from '../helpers/sites-browser.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { TestClock } from '../helpers/clock.js';

/**
 * README "Several sites": sign-in happens once, on publicUrl's host
 * (auth.localhost); each site (app.localhost, grafana.localhost) gets its
 * own host-only session cookie through a one-time hand-off code (60 s, bound
 * to one host, single use); one logout, on any host, ends them all with one
 * revocation. Requests go to 127.0.0.1 with the Host a browser would send,
 * and a small per-host cookie jar plays the browser's.
 */

let h: Harness;
let app: ScriptedUpstream;
let grafana: ScriptedUpstream;
let home: ScriptedUpstream;
let port: string;
const clock = new TestClock();

t.before(async () => {
  home = await startScriptedUpstream();
  app = await startScriptedUpstream();
  grafana = await startScriptedUpstream();
  h = await startHarness({
    publicHost: 'auth.localhost',
    clock,
    config: {
      routes: [{ path: '/', upstream: home.url }],
      sites: [
        { host: 'app.localhost', routes: [{ path: '/', upstream: app.url }] },
        { host: 'grafana.localhost', routes: [{ path: '/', upstream: grafana.url }] },
      ],
    },
  });
  port = new URL(h.url).port;
});

t.teardown(async () => {
  await h.close();
  await Promise.all([home.close(), app.close(), grafana.close()]);
});

/** A browser on the gateway's port. */
class Browser extends SitesBrowser {
  constructor() {
    super(port);
  }
}

const site = (host: string, path = '/') => `http://${host}.localhost:${port}${path}`;

function signInThrough(t: Test, browser: Browser, start: string, user = 'alice'): Promise<URL> {
  return browser.signInThrough(t, h.url, start, user);
}

t.test('a site signs in through the sign-in host and gets its own host-only session by a one-time code', async (t) => {
  const browser = new Browser();
  const handoff = await signInThrough(t, browser, site('app', '/orders?id=7'));
  t.equal(handoff.origin, new URL(site('app')).origin, 'the hand-off is on the site');
  t.equal(handoff.pathname, '/.gatehouse/handoff');
  const code = handoff.searchParams.get('code')!;
  t.match(code, /^[A-Za-z0-9_-]{43}$/);
  t.ok(browser.session('auth.localhost'), 'a session on the sign-in host');
  t.notOk(browser.session('app.localhost'), 'none on the site yet');

  const used = await browser.get(handoff.href);
  t.equal(used.status, 302);
  t.equal(used.headers.location, '/orders?id=7', 'back to the original path');
  t.ok(browser.session('app.localhost'), 'the site\'s own session cookie');
  t.not(browser.session('app.localhost'), browser.session('auth.localhost'), 'another session id than the sign-in host\'s');
  for (const line of browser.setCookies) t.notMatch(line, /domain=/i, 'no cookie carries a Domain attribute');

  app.seen.length = 0;
  const page = await browser.get(site('app', '/orders?id=7'));
  t.equal(page.status, 200);
  t.match(app.seen[0]?.headers.authorization, /^Bearer \S+/, 'the site\'s upstream gets the user\'s token');

  t.equal((await browser.get(handoff.href)).status, 400, 'the code a second time: 400');
  t.notOk(h.logText().includes(code), 'the code is never logged');
});

t.test('a browser signed in on the sign-in host goes on to another site at once, without the AS', async (t) => {
  const browser = new Browser();
  await browser.get((await signInThrough(t, browser, site('app', '/'))).href);
  const watch = watchTokenEndpoint(h.as);
  const first = await browser.get(site('grafana', '/d/1'));
  t.equal(first.status, 302);
  const login = await browser.get(first.headers.location!);
  t.equal(login.status, 302);
  const handoff = new URL(login.headers.location!);
  t.equal(handoff.host, `grafana.localhost:${port}`, 'straight to grafana\'s hand-off');
  t.equal((await browser.get(handoff.href)).headers.location, '/d/1');
  grafana.seen.length = 0;
  t.equal((await browser.get(site('grafana', '/d/1'))).status, 200);
  t.equal(grafana.seen.length, 1);
  t.equal(watch.requests, 0, 'no token request');
});

t.test('a code used on another host, late, or malformed gets 400 and no session; never a 5xx', async (t) => {
  const browser = new Browser();
  const handoff = await signInThrough(t, browser, site('app', '/x'));
  const code = handoff.searchParams.get('code')!;
  const elsewhere = await browser.get(site('grafana', `/.gatehouse/handoff?code=${code}`));
  t.equal(elsewhere.status, 400, 'on another site');
  t.notOk(browser.session('grafana.localhost'));
  t.equal((await browser.get(handoff.href)).status, 400, 'and it is spent');
  t.notOk(browser.session('app.localhost'));

  const late = new URL((await browser.get((await browser.get(site('app', '/y'))).headers.location!)).headers.location!);
  clock.advance(61_000);
  try {
    t.equal((await browser.get(late.href)).status, 400, 'after 60 s');
  } finally {
    clock.advance(-61_000);
  }
  t.notOk(browser.session('app.localhost'));

  for (const query of ['', '?code=', '?code=x', `?code=${'A'.repeat(43)}`, `?code=${'A'.repeat(5000)}`, '?code=a&code=b', '?code=%00%ff', `?code[]=1`]) {
    const answer = await browser.get(site('app', `/.gatehouse/handoff${query}`), { accept: 'application/json' });
    t.equal(answer.status, 400, `handoff${query.slice(0, 30)}`);
  }
  const onSignInHost = await browser.get(`${h.url}/.gatehouse/handoff?code=${code}`);
  t.ok(onSignInHost.status >= 400 && onSignInHost.status < 500, `on the sign-in host: ${onSignInHost.status}`);
  t.notOk(browser.session('app.localhost'));
});

t.test('returnTo accepts a path or a URL on a configured site; anything else becomes /', async (t) => {
  const browser = new Browser();
  await browser.get((await signInThrough(t, browser, site('app', '/'))).href);
  for (const returnTo of ['https://evil.example/', `http://evil.localhost:${port}/`, `http://user@app.localhost:${port}/`, `https://app.localhost:${port}/`, '//app.localhost/x', `http://auth.localhost:${port}/x`]) {
    const answer = await browser.get(`${h.url}/login?returnTo=${encodeURIComponent(returnTo)}`);
    const location = answer.headers.location ?? '';
    t.notOk(location.includes('evil'), `${returnTo}: not a redirect to it`);
    t.notOk(location.includes('/.gatehouse/handoff'), `${returnTo}: no hand-off code`);
  }
});

t.test('logout on a site ends the browser\'s sessions on every site, with one revocation', async (t) => {
  const browser = new Browser();
  await browser.get((await signInThrough(t, browser, site('app', '/'), 'bob')).href);
  await browser.get((await browser.get((await browser.get(site('grafana', '/'))).headers.location!)).headers.location!);
  t.equal((await browser.get(site('grafana', '/'))).status, 200, 'signed in on grafana');
  const other = new Browser();
  const watch = watchTokenEndpoint(h.as);
  await other.get((await signInThrough(t, other, site('app', '/'), 'bob')).href);
  // The user's one token record holds the tokens of the latest sign-in (README "Storage").
  const refreshToken = watch.issued.find((issued) => issued.grantType === 'authorization_code')!.refreshToken!;
  const out = await browser.get(site('grafana', '/logout'), { 'sec-fetch-site': 'same-origin' });
  t.equal(out.status, 302);
  for (const host of ['app', 'grafana']) {
    const answer = await browser.get(site(host, '/'), { accept: 'application/json', 'sec-fetch-mode': 'cors' });
    t.equal(answer.status, 401, `${host}: signed out`);
  }
  const session = await browser.get(`${h.url}/session`, { accept: 'application/json' });
  t.equal(session.status, 401, 'the sign-in host too');
  t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, true, 'another browser of the user is still signed in: no revocation yet');
  t.equal((await other.get(site('app', '/'))).status, 200, 'the other browser is not signed out');
  await other.get(`${h.url}/logout`, { 'sec-fetch-site': 'same-origin' });
  t.equal((await other.get(site('app', '/'), { accept: 'application/json', 'sec-fetch-mode': 'cors' })).status, 401, 'logout on the sign-in host ends the site session');
  t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'the last one out revokes the refresh token');
});
