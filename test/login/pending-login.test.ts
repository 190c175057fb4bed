import t from 'tap';
import { randomBytes } from 'node:crypto';
import { PENDING_LOGIN_TTL_MS, PendingLogins, findByState, type PendingLogin } from '../../src/oauth/pending-login.js';
import { Sealer } from '../../src/session/seal.js';

/**
 * README "What the browser sees": the pending login lives in a sealed login cookie bound to this
 * browser, and its state is accepted within 10 minutes only. Time is
 * injected, not slept through.
 */
const sealer = new Sealer([randomBytes(32).toString('base64')]);
const logins = new PendingLogins(sealer);
const T0 = Date.UTC(2026, 0, 1);
const entry = (state: string, createdAt = T0): PendingLogin => ({ state, codeVerifier: `verifier-${state}`, nonce: `nonce-${state}`, returnTo: '/x', createdAt });

t.test('a pending login is found by its state until 10 minutes have passed', async (t) => {
  t.equal(PENDING_LOGIN_TTL_MS, 600_000);
  const cookie = logins.write([entry('state-a')])!;
  t.same(logins.read(cookie, T0 + 1000), [entry('state-a')], 'read back a second later');
  t.equal(logins.read(cookie, T0 + PENDING_LOGIN_TTL_MS - 1).length, 1, 'still there a millisecond before 10 minutes');
  t.same(logins.read(cookie, T0 + PENDING_LOGIN_TTL_MS), [], 'gone at 10 minutes');
  t.same(logins.read(cookie, T0 + 3_600_000), [], 'gone an hour later');
  t.same(logins.read(cookie, T0 - 60_000), [], 'an entry from the future is refused');
});

t.test('expired entries drop out while live ones stay', async (t) => {
  const cookie = logins.write([entry('old', T0), entry('new', T0 + 300_000)])!;
  t.same(logins.read(cookie, T0 + 700_000).map((e) => e.state), ['new']);
});

t.test('a browser keeps at most 4 pending logins, the newest', async (t) => {
  const cookie = logins.write(['a', 'b', 'c', 'd', 'e'].map((state, index) => entry(state, T0 + index)))!;
  t.same(logins.read(cookie, T0 + 10).map((e) => e.state), ['b', 'c', 'd', 'e']);
  t.equal(logins.write([]), undefined, 'no entries, no cookie');
});

t.test('the login cookie is sealed: nothing in it reads in clear, and forged values count as none', async (t) => {
  const cookie = logins.write([entry('visible-state-value')])!;
  for (const text of [cookie, Buffer.from(cookie.slice(3), 'base64url').toString('latin1')]) {
    t.notOk(text.includes('visible-state-value') || text.includes('verifier-') || text.includes('nonce-'), 'state, verifier and nonce hidden');
  }
  t.same(logins.read(undefined, T0), []);
  t.same(logins.read('', T0), []);
  t.same(logins.read('v1.garbage', T0), []);
  t.same(logins.read(cookie.slice(0, -2), T0), [], 'truncated');
  t.same(logins.read(sealer.seal(JSON.stringify([entry('x')]), 'tokens:alice'), T0), [], 'sealed for another context');
  t.same(logins.read(sealer.seal('not json', 'pending-login'), T0), [], 'not JSON');
  t.same(new PendingLogins(new Sealer([randomBytes(32).toString('base64')])).read(cookie, T0), [], 'another gateway key');
});

t.test('findByState matches the exact state only', async (t) => {
  const entries = [entry('abc'), entry('abcd')];
  t.equal(findByState(entries, 'abcd')?.state, 'abcd');
  t.equal(findByState(entries, 'abc')?.state, 'abc');
  t.equal(findByState(entries, 'ab'), undefined, 'a prefix is not a match');
  t.equal(findByState(entries, 'ABC'), undefined, 'case matters');
  t.equal(findByState(entries, ''), undefined);
  t.equal(findByState([], 'abc'), undefined);
});

t.test('the cookie value stays within its budget: the oldest entries go first', async (t) => {
  const long = (state: string, index: number): PendingLogin => ({ ...entry(state, T0 + index), returnTo: `/${'r'.repeat(1200)}` });
  const cookie = logins.write(['a', 'b', 'c', 'd'].map(long))!;
  t.ok(cookie.length <= 4096 - 188, `${cookie.length} bytes`);
  const kept = logins.read(cookie, T0 + 10).map((e) => e.state);
  t.ok(kept.length >= 1 && kept.length < 4, `some entries dropped (kept ${kept.length})`);
  t.equal(kept.at(-1), 'd', 'the newest is kept');
  t.same(kept, ['a', 'b', 'c', 'd'].slice(4 - kept.length), 'the oldest were dropped');
  const alone = logins.read(logins.write([{ ...entry('x'), returnTo: `/${'r'.repeat(8000)}` }], '/home')!, T0 + 10);
  t.same(alone.map((e) => [e.state, e.returnTo]), [['x', '/home']], 'an entry too large alone keeps its state and returns to the fallback');
});
