import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { waitFor } from '../helpers/wait-for.js';
import { shortLoginTokens, storedTokens } from '../helpers/refresh.js';
import { TestClock } from '../helpers/clock.js';

/**
 * README "Configuration" `tokens.refreshSkew`: refresh this long before the access token
 * expires, the effective skew being at most half the token's lifetime. With
 * a 6 s token and a 10 s skew the gateway refreshes 3 s before expiry: not
 * right after sign-in (the cap), then while the old token is still alive.
 */
t.test('refreshSkew refreshes before expiry, capped at half the lifetime', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(6), config: { tokens: { refreshSkew: '10s' } } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const first = watch.issued.at(-1)!;

  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.equal(h.as.grants.refreshToken, 0, 'no refresh right after sign-in: a 10 s skew on a 6 s token counts as 3 s');

  const { expiresAt } = (await storedTokens(h, 'alice'))!;
  await waitFor('the token to enter the skew', () => Date.now() >= expiresAt - 3000 + 50);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.equal(h.as.grants.refreshToken, 1, 'refreshed within the skew');
  t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${watch.issued.at(-1)!.accessToken}`, 'the new token went upstream');
  t.equal((await introspect(h.as, first.accessToken!, 'access_token')).active, true, 'while the old token was still alive at the AS');
});

t.test('refreshSkew 0 uses the token until it expires', async (t) => {
  // The gateway's clock is moved instead of waiting, so no assertion depends on how fast the machine is;
  // the AS's own clock does not move, so the first token stays valid there throughout.
  const clock = new TestClock();
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(60), config: { tokens: { refreshSkew: 0 } }, clock });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'bob' });
  const first = watch.issued.at(-1)!;
  const { expiresAt } = (await storedTokens(h, 'bob'))!;
  // A second before expiry: the default skew (30 s, capped at half the 60 s lifetime) would have refreshed long ago.
  clock.advance(expiresAt - 1000 - clock.now());
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.equal(h.as.grants.refreshToken, 0, 'no refresh while the token is valid');
  t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${first.accessToken}`, 'the first token went upstream');
  clock.advance(expiresAt + 1000 - clock.now());
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.equal(h.as.grants.refreshToken, 1, 'refreshed once expired');
  t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${watch.issued.at(-1)!.accessToken}`, 'and the new token went upstream');
});
