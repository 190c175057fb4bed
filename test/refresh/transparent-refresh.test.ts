import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { shortLoginTokens, storedTokens, waitUntilExpired, watchRefreshGrants } from '../helpers/refresh.js';

/**
 * README "What the browser sees", "valid session, token expired": the gateway refreshes with
 * grant_type refresh_token and no `scope`, stores the new access token and
 * the rotated refresh token, then proxies; the same cookie keeps working.
 * README "Storage": a refresh that does not rotate keeps the stored refresh token.
 */
t.test('an expired access token is refreshed, with refresh-token rotation', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2) });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const refreshes = watchRefreshGrants(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const first = watch.issued.at(-1)!;
  const before = await (await fetch(`${h.url}/api/me`, { headers: { cookie } })).json() as { scope: string };
  t.equal(h.as.grants.refreshToken, 0, 'a fresh token is not refreshed');

  await waitUntilExpired(h, first.accessToken!);
  const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(response.status, 200, 'the same cookie works after the access token expired');
  const after = (await response.json()) as { sub: string; scope: string };
  t.equal(after.sub, 'alice');
  t.equal(h.as.grants.refreshToken, 1, 'one refresh grant');
  const refreshed = watch.issued.at(-1)!;
  t.equal(refreshed.grantType, 'refresh_token');
  t.not(refreshed.accessToken, first.accessToken, 'a new access token was issued');
  t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${refreshed.accessToken}`, 'the upstream received the new token');

  t.equal(refreshes.length, 1);
  t.equal(refreshes[0]!.refresh_token, first.refreshToken, 'the grant used the stored refresh token');
  t.equal(refreshes[0]!.scope, undefined, 'the refresh request carries no scope');
  t.equal(after.scope, before.scope, 'so the granted scope stays');

  const stored = await storedTokens(h, 'alice');
  t.equal(stored?.accessToken, refreshed.accessToken, 'the new access token is stored');
  t.ok(refreshed.refreshToken && refreshed.refreshToken !== first.refreshToken, 'the AS rotated the refresh token');
  t.equal(stored?.refreshToken, refreshed.refreshToken, 'the rotated refresh token is stored');
  t.equal((await introspect(h.as, first.refreshToken!, 'refresh_token')).active, false, 'the old one is spent');
  t.ok(stored!.expiresAt > Date.now() + 60_000, "the expiry follows the new token's expires_in");

  const again = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(again.status, 200, 'the cookie keeps working');
  t.equal(h.as.grants.refreshToken, 1, 'without another refresh');
  t.match(await (await fetch(`${h.url}/session`, { headers: { cookie } })).json(), { user: { sub: 'alice' } });
});

t.test('without rotation the stored refresh token is kept and used again', async (t) => {
  const h = await startHarness({ accessTokenTtl: 2, rotateRefreshTokens: false });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'bob' });
  const first = watch.issued.at(-1)!;

  await waitUntilExpired(h, first.accessToken!);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  const second = watch.issued.at(-1)!;
  t.equal(second.grantType, 'refresh_token');
  t.ok(second.refreshToken === undefined || second.refreshToken === first.refreshToken, 'the AS did not rotate the refresh token');
  t.equal((await storedTokens(h, 'bob'))?.refreshToken, first.refreshToken, 'the stored refresh token is kept');
  t.equal((await storedTokens(h, 'bob'))?.accessToken, second.accessToken, 'beside the new access token');

  await waitUntilExpired(h, second.accessToken!);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'a second refresh works with the kept token');
  t.equal(h.as.grants.refreshToken, 2);
  t.equal(h.as.grants.refreshTokenErrors, 0);
  t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${watch.issued.at(-1)!.accessToken}`);
});
