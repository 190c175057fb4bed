import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { openIdUserKey, plainUserKey } from '../../src/oauth/identify.js';
import { storedTokens } from '../helpers/refresh.js';

/**
 * README "Storage": with an OpenID provider the token record is keyed by the ID
 * token's iss and sub, whatever `userIdClaim` names. Two accounts that share
 * the shown claim never share a record: one's login does not replace the
 * other's tokens, one's logout everywhere does not end the other's sessions.
 * The demo AS names account `alice` and account `Alice` both "Alice".
 */
t.test('two accounts with one shown name keep apart', async (t) => {
  const h = await startHarness({ config: { provider: { userIdClaim: 'name' } } });
  t.teardown(() => h.close());
  const a = await signIn(h.url, { user: 'alice' });
  const b = await signIn(h.url, { user: 'Alice' });

  for (const [who, { cookie }, sub] of [['the first account', a, 'alice'], ['the second account', b, 'Alice']] as const) {
    const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(response.status, 200);
    t.match(await response.json(), { sub }, `${who} reaches the upstream with its own token`);
    const session = (await (await fetch(`${h.url}/session`, { headers: { cookie } })).json()) as { user: Record<string, unknown> };
    t.equal(session.user.sub, sub, `${who}'s /session shows its own claims`);
  }
  t.not((await storedTokens(h, 'alice'))?.accessToken, (await storedTokens(h, 'Alice'))?.accessToken, 'two token records');

  const logout = await fetch(`${h.url}/logout?everywhere=1`, { method: 'POST', headers: { cookie: b.cookie, origin: h.url }, redirect: 'manual' });
  t.equal(logout.status, 302);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: b.cookie } })).status, 401, 'the second account signed out everywhere');
  const still = await fetch(`${h.url}/api/me`, { headers: { cookie: a.cookie } });
  t.equal(still.status, 200, "the first account's session is untouched");
  t.match(await still.json(), { sub: 'alice' });
  t.ok(await storedTokens(h, 'alice'), 'and so is its token record');
  t.ok(h.logs.some((line) => line.msg === 'session created'), 'logins are logged');
});

t.test('record keys: iss and sub together, JSON types kept for plain OAuth', async (t) => {
  t.not(openIdUserKey('https://a.example', 'x'), openIdUserKey('https://b.example', 'x'), 'one sub at two issuers: two users');
  t.not(openIdUserKey('https://a.example', 'b c'), openIdUserKey('https://a.example b', 'c'), 'no ambiguity between the parts');
  t.equal(openIdUserKey('https://a.example', 'x'), openIdUserKey('https://a.example', 'x'), 'stable');
  t.not(plainUserKey(1), plainUserKey('1'), 'the number 1 and the string "1" are different users');
  t.notMatch(openIdUserKey('https://a.example', 'alice'), /alice/, 'the key names nobody in clear');
});
