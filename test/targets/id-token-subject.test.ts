import t from 'tap';
import { signIn } from '../helpers/sign-in.js';
import { startTargetsHarness, LEDGER } from '../helpers/targets-harness.js';
import { storedTokens, userKey } from '../helpers/refresh.js';
import { TestClock } from '../helpers/clock.js';

// The gateway's cache keeps token records without the ID token (src/session/store.ts, cachedTokens; the store-level
// rules are in test/store/cached-tokens-without-id-token.test.ts). What uses the ID token reads the stored record:
// a token target exchanging the ID token (README "A token for each API", subjectToken: id), a refresh (which must
// keep it) and logout's id_token_hint.
const clock = new TestClock();
const h = await startTargetsHarness({
  clock,
  routes: ({ plain, ledger }) => [
    { path: '/api/plain', upstream: plain.url },
    { path: '/api/ledger', upstream: ledger.url, token: { exchange: { audience: LEDGER, scopes: ['ledger.read'], subjectToken: 'id' } } },
  ],
});
t.teardown(() => h.close());

t.test('with the ID token out of the cached record, an ID-token exchange, a refresh and logout still have it', async (t) => {
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const store = h.gateway.context.store;
  const signedIn = (await storedTokens(h, 'alice'))!;
  t.ok(signedIn.idToken, 'the stored record has the ID token');
  t.ok(store.peekTokens(userKey(h, 'alice')), 'the record is cached after the sign-in');
  t.equal(store.peekTokens(userKey(h, 'alice'))!.idToken, undefined, 'without the ID token');

  const before = h.as.grants.byTarget[LEDGER] ?? 0;
  t.equal((await fetch(`${h.url}/api/ledger/1`, { headers: { cookie } })).status, 200, 'the ID token is exchanged for a ledger token');
  t.equal((h.as.grants.byTarget[LEDGER] ?? 0) - before, 1, 'one exchange');

  // Past every token's lifetime as the gateway sees it: the sign-in tokens are refreshed, the ledger token exchanged again.
  clock.advance(120_000);
  const refreshes = h.as.grants.refreshToken;
  t.equal((await fetch(`${h.url}/api/plain/1`, { headers: { cookie } })).status, 200);
  t.equal(h.as.grants.refreshToken - refreshes, 1, 'the sign-in tokens were refreshed');
  const refreshed = (await storedTokens(h, 'alice'))!;
  t.not(refreshed.accessToken, signedIn.accessToken);
  t.ok(refreshed.idToken, 'the refreshed record still has an ID token');
  t.equal(store.peekTokens(userKey(h, 'alice'))!.idToken, undefined, 'the cached one has none');
  t.equal((await fetch(`${h.url}/api/ledger/2`, { headers: { cookie } })).status, 200, 'the stale ledger token is exchanged again');
  t.equal((h.as.grants.byTarget[LEDGER] ?? 0) - before, 2, 'a second exchange');

  const logout = await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' });
  t.equal(logout.status, 302);
  const hint = new URL(logout.headers.get('location')!).searchParams.get('id_token_hint');
  t.equal(hint, refreshed.idToken, 'logout sends the stored ID token as id_token_hint');
});
