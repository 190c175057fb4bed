import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { navigate } from '../helpers/navigate.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees": a refresh token that has expired or was revoked at the AS is a
 * rejected refresh: the session ends with a clean 401, JSON for API calls,
 * the sign-in page for navigations, cookie cleared; never a 5xx.
 */
t.test('refresh token expired at the AS', async (t) => {
  // Access tokens of 2 s (refreshed from 1 s before expiry), refresh tokens of 3 s.
  const h = await startHarness({ accessTokenTtl: 2, refreshTokenTtl: 3 });
  t.teardown(() => h.close());
  const api = await signIn(h.url, { user: 'alice' });
  const page = await signIn(h.url, { user: 'bob' });
  await sleep(3500);

  const me = await fetch(`${h.url}/api/me`, { headers: { cookie: api.cookie } });
  t.equal(me.status, 401, 'an API call gets 401');
  t.strictSame(await me.json(), { error: 'unauthorized' });
  const cleared = findSetCookie(me, 'session_id');
  t.ok(cleared && isDeletion(cleared), 'the cookie is cleared');
  t.ok(h.as.grants.refreshTokenErrors >= 1, 'the AS refused the refresh');

  const navigation = await navigate(`${h.url}/orders`, { cookie: page.cookie });
  t.equal(navigation.status, 401, 'a navigation gets 401');
  t.match(navigation.body, /login\?returnTo=%2Forders/, 'with a sign-in link back to the page');
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: page.cookie } })).status, 401, 'the session has ended');
  t.notOk(h.logs.some((line) => typeof line.level === 'number' && line.level >= 50), 'no error logged');
});

t.test('refresh token revoked at the AS', async (t) => {
  const h = await startHarness({ accessTokenTtl: 2 });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const revocation = await fetch(`${h.as.listenUrl}/token/revocation`, {
    method: 'POST',
    body: new URLSearchParams({ token: watch.issued.at(-1)!.refreshToken!, token_type_hint: 'refresh_token', client_id: CLIENT_ID, client_secret: h.clientSecret }),
  });
  t.equal(revocation.status, 200);
  await sleep(1200); // past the refresh point: expiry minus the skew (at most half of 2 s)

  const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(me.status, 401);
  t.strictSame(await me.json(), { error: 'unauthorized' });
  // The API call above ended the session: a navigation now has none and goes through sign-in (README "What the browser sees").
  const navigation = await navigate(`${h.url}/`, { cookie });
  t.equal(navigation.status, 302);
  t.equal(navigation.headers.location, '/login?returnTo=%2F');
  t.notOk(h.logs.some((line) => typeof line.level === 'number' && line.level >= 50), 'no error logged');
});
