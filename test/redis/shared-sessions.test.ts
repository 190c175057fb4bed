import t from 'tap';
import { hashSessionId } from '../../src/session/session-id.js';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { activeSessions, get, signInAcross, startReplicas, within } from './replicas.js';
import { storedTokens, userKey } from '../helpers/refresh.js';

/**
 * README "Run several replicas (Redis)": replicas sharing `redis://` share sessions and token records, and
 * a change made by one is seen by every other within 200 ms (their
 * in-process caches are invalidated over pub/sub).
 */
const COHERENCE_MS = 200;

t.test('a session created on one replica works on the other; logout on one ends it on both within 200 ms', { skip: redisMissing }, async (t) => {
  const { h, urls, gateways, inspect } = await startReplicas(t, 2, { config: { session: { ttl: '1h' } } });
  const [a, b] = urls as [string, string];
  const alice = await signIn(a, { user: 'alice' });

  // Both replicas serve it, and both now hold it in their caches.
  t.equal((await get(b, '/api/me', alice.cookie)).status, 200, 'replica B serves a session made on A');
  t.equal((await get(a, '/api/me', alice.cookie)).status, 200);
  const session = JSON.parse((await get(b, '/session', alice.cookie)).body) as { user: { sub: string } };
  t.equal(session.user.sub, 'alice', 'B shows the user A signed in');

  // What Redis holds: namespaced keys, the session only by its hash, TTLs of what remains of the session.
  const sessionId = alice.cookie.split('=')[1]!;
  const keys = await inspect.keys('*');
  t.ok(keys.length > 0 && keys.every((key) => key.startsWith('gatehouse:')), `every key is namespaced: ${keys.join(', ')}`);
  t.notOk(keys.some((key) => key.includes(sessionId)), 'no key names the raw session id');
  const sessionKey = `gatehouse:s:${hashSessionId(sessionId)}`;
  t.ok(keys.includes(sessionKey), 'the session is stored under the hash of its id');
  for (const key of [sessionKey, `gatehouse:t:${userKey(h, 'alice')}`]) {
    const ttl = await inspect.pTTL(key);
    t.ok(ttl > 3_590_000 && ttl <= 3_600_000, `${key} expires with the session (PTTL ${ttl})`);
  }
  const everything = (await Promise.all(keys.filter((key) => !key.endsWith(':sessions')).map((key) => inspect.get(key)))).join('\n');
  t.notOk(everything.includes(sessionId), 'no value holds the raw session id');

  t.equal(await activeSessions(gateways[0]!), 1);
  t.equal(await activeSessions(gateways[1]!), 1, 'the same store-wide count on both replicas');
  t.ok((await signInAcross(b, b, 'bob')).cookie, 'bob signs in on B');
  t.equal(await activeSessions(gateways[0]!), 2, 'a session made on B is counted on A');
  t.equal(await activeSessions(gateways[1]!), 2);

  // A second session of alice keeps her token record (and grant) alive: a 401 can only come from the gateway.
  const phone = await signIn(a, { user: 'alice' });
  t.equal((await get(b, '/api/me', phone.cookie)).status, 200);
  t.equal(await activeSessions(gateways[1]!), 3);

  const logout = await get(a, '/logout', alice.cookie);
  t.equal(logout.status, 302);
  const took = await within('B refuses the session ended on A', COHERENCE_MS, async () => {
    const received = h.upstream.received.length;
    const { status } = await get(b, '/api/me', alice.cookie);
    return status === 401 && h.upstream.received.length === received;
  });
  t.comment(`replica B refused the session ${took.toFixed(1)} ms after the logout on A returned`);
  t.ok(took <= COHERENCE_MS, `seen within ${COHERENCE_MS} ms (${took.toFixed(1)} ms)`);
  const received = h.upstream.received.length;
  const refused = await get(b, '/api/me', alice.cookie);
  t.equal(refused.status, 401);
  t.same(JSON.parse(refused.body), { error: 'unauthorized' }, "the gateway's own 401");
  t.match(refused.setCookie.join('\n'), /session_id=;/, 'B clears the stale cookie');
  t.equal(h.upstream.received.length, received, 'and sends nothing upstream');
  t.equal((await get(b, '/api/me', phone.cookie)).status, 200, "alice's other session still works on B");
  t.equal(await activeSessions(gateways[0]!), 2, 'the logout is counted on A');
  t.equal(await activeSessions(gateways[1]!), 2, 'and on B');
});

t.test('a token record replaced on one replica is used by the other within 200 ms', { skip: redisMissing }, async (t) => {
  const { h, urls } = await startReplicas(t, 2);
  const [a, b] = urls as [string, string];
  const laptop = await signIn(a, { user: 'carol' });
  t.equal((await get(b, '/api/me', laptop.cookie)).status, 200, 'B caches the token record');
  const before = h.upstream.received.at(-1)!.headers.authorization;

  // A new login of the same user replaces the shared token record (README "Run several replicas (Redis)"), here on A.
  await signIn(a, { user: 'carol' });
  const fresh = await storedTokens(h, 'carol');
  t.not(`Bearer ${fresh!.accessToken}`, before, 'the new login issued another access token');
  const took = await within('B uses the new access token', COHERENCE_MS, async () => {
    const response = await get(b, '/api/me', laptop.cookie);
    return response.status === 200 && h.upstream.received.at(-1)!.headers.authorization === `Bearer ${fresh!.accessToken}`;
  });
  t.comment(`replica B used the token record written on A ${took.toFixed(1)} ms later`);
  t.ok(took <= COHERENCE_MS, `seen within ${COHERENCE_MS} ms (${took.toFixed(1)} ms)`);
});
