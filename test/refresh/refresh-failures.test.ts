import t, { type Test } from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { revokeAtAuthorizationServer, shortLoginTokens, storedTokens, waitUntilExpired } from '../helpers/refresh.js';
import type { ProxyMode } from '../helpers/switchable-proxy.js';

/**
 * README "What the browser sees": a refresh rejected by the AS (any 4xx but 408 and 429) deletes the
 * token record and every session of the user, clears the cookie, 401; an AS
 * that is unreachable, answers 5xx or 429 gives 503 and keeps everything, so
 * the same cookie works once it recovers. Nothing is sent upstream on failure.
 */
t.test('refresh failures', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2) });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const users = ['revoked', 'invalid-request', 'html-error', 'down', 'busy', 'throttled'];
  const signedIn = new Map<string, { cookies: string[]; refreshToken: string; accessToken: string }>();
  for (const user of users) {
    const first = await signIn(h.url, { user });
    const second = await signIn(h.url, { user });
    const issued = watch.issued.at(-1)!;
    signedIn.set(user, { cookies: [first.cookie, second.cookie], refreshToken: issued.refreshToken!, accessToken: issued.accessToken! });
  }
  for (const { accessToken } of signedIn.values()) await waitUntilExpired(h, accessToken);

  async function expectSessionsEnded(t: Test, user: string, mode: ProxyMode | 'revoked'): Promise<void> {
    const { cookies, refreshToken } = signedIn.get(user)!;
    if (mode === 'revoked') await revokeAtAuthorizationServer(h, refreshToken);
    else h.asProxy.mode = mode;
    const received = h.upstream.received.length;
    try {
      const response = await fetch(`${h.url}/api/me`, { headers: { cookie: cookies[0]! } });
      t.equal(response.status, 401);
      t.strictSame(await response.json(), { error: 'unauthorized' });
      const cleared = findSetCookie(response, 'session_id');
      t.ok(cleared && isDeletion(cleared), 'the cookie is cleared');
    } finally {
      h.asProxy.mode = 'up';
    }
    t.equal(await storedTokens(h, user), null, 'the token record is deleted');
    const other = await fetch(`${h.url}/api/me`, { headers: { cookie: cookies[1]! } });
    t.equal(other.status, 401, "the user's other session is ended too");
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie: cookies[0]! } })).status, 401);
    t.equal(h.upstream.received.length, received, 'nothing was sent upstream');
  }

  async function expectSessionsKept(t: Test, user: string, mode: ProxyMode): Promise<void> {
    const { cookies } = signedIn.get(user)!;
    const received = h.upstream.received.length;
    const grants = h.as.grants.refreshToken;
    h.asProxy.mode = mode;
    try {
      for (const cookie of cookies) {
        const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
        t.equal(response.status, 503, `503 while the AS is ${mode}`);
        t.match(await response.json(), { error: 'provider_unavailable' });
        t.equal(findSetCookie(response, 'session_id'), undefined, 'the cookie is kept');
      }
      t.equal(h.upstream.received.length, received, 'nothing was sent upstream');
      t.ok(await storedTokens(h, user), 'the token record is kept');
    } finally {
      h.asProxy.mode = 'up';
    }
    for (const cookie of cookies) {
      const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
      t.equal(response.status, 200, 'after recovery the same cookie works');
      t.match(await response.json(), { sub: user });
    }
    t.equal(h.as.grants.refreshToken, grants + 1, 'with one refresh');
  }

  t.test('the grant was revoked at the AS (invalid_grant)', (t) => expectSessionsEnded(t, 'revoked', 'revoked'));
  t.test('another OAuth error (400 invalid_request)', (t) => expectSessionsEnded(t, 'invalid-request', 'error400'));
  t.test('a 400 with a non-JSON body', (t) => expectSessionsEnded(t, 'html-error', 'html400'));
  t.test('the AS is unreachable', (t) => expectSessionsKept(t, 'down', 'down'));
  t.test('the AS answers 503', (t) => expectSessionsKept(t, 'busy', 'error503'));
  t.test('the AS answers 429', (t) => expectSessionsKept(t, 'throttled', 'error429'));
});

t.test('an expired access token without a refresh token ends the session', async (t) => {
  const h = await startHarness({ accessTokenTtl: 2, issueRefreshTokens: false });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const laptop = await signIn(h.url, { user: 'nora' });
  const phone = await signIn(h.url, { user: 'nora' });
  const issued = watch.issued.at(-1)!;
  t.equal(issued.refreshToken, undefined, 'the AS issued no refresh token');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: laptop.cookie } })).status, 200, 'the fresh token works');

  await waitUntilExpired(h, issued.accessToken!);
  const requests = watch.requests;
  const received = h.upstream.received.length;
  const response = await fetch(`${h.url}/api/me`, { headers: { cookie: laptop.cookie } });
  t.equal(response.status, 401);
  t.strictSame(await response.json(), { error: 'unauthorized' });
  const cleared = findSetCookie(response, 'session_id');
  t.ok(cleared && isDeletion(cleared), 'the cookie is cleared');
  t.equal(await storedTokens(h, 'nora'), null, 'the token record is deleted');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 401, 'with every session of the user');
  t.equal(watch.requests, requests, 'no token request was made');
  t.equal(h.upstream.received.length, received, 'nothing was sent upstream');
});

