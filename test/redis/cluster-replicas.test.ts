import t from 'tap';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { redisHaMissing, startRedisCluster } from '../helpers/redis-ha.js';
import { signIn } from '../helpers/sign-in.js';
import { activeSessions, get, signInAcross, startReplicasOn, within } from './replicas.js';

/**
 * README, "Redis Sentinel and Cluster": the replica guarantees of a single
 * Redis (shared-sessions, login-across-replicas and
 * one-refresh-across-replicas tests) hold on redis+cluster://, a Cluster of
 * three masters: the session set, the state claims, the lock and the
 * invalidation all work with every key in one hash slot. Each test uses
 * its own session.keyPrefix, so they share the one Cluster.
 */
const COHERENCE_MS = 200;

t.test('Redis Cluster', { skip: redisHaMissing }, async (t) => {
  const cluster = await startRedisCluster();
  t.teardown(() => cluster.close());

  await t.test('a login started on one replica completes on the other; its state replayed is refused', async (t) => {
    const { h, urls } = await startReplicasOn(t, cluster.url, 2, { config: { session: { keyPrefix: 'login' } } });
    const [a, b] = urls as [string, string];
    const watch = watchTokenEndpoint(h.as);
    const login = await signInAcross(a, b, 'dave');
    t.equal(login.status, 302, 'B completes the sign-in A started');
    t.equal((await get(a, '/api/me', login.cookie)).status, 200);
    const replay = await get(a, login.callbackPath, login.loginCookie);
    t.equal(replay.status, 400, 'the same callback on A is refused');
    t.equal(watch.codeExchanges, 1);
  });

  await t.test('a session works on both replicas, is counted on both, and a logout on one ends it on the other within 200 ms', async (t) => {
    const { h, urls, gateways } = await startReplicasOn(t, cluster.url, 2, { config: { session: { keyPrefix: 'sessions' } } });
    const [a, b] = urls as [string, string];
    const alice = await signIn(a, { user: 'alice' });
    t.equal((await get(b, '/api/me', alice.cookie)).status, 200, 'B serves a session made on A');
    t.equal((await get(a, '/api/me', alice.cookie)).status, 200);
    t.ok((await signInAcross(b, b, 'bob')).cookie);
    t.equal(await activeSessions(gateways[0]!), 2, 'the store-wide count on A');
    t.equal(await activeSessions(gateways[1]!), 2, 'and on B');
    t.equal((await get(a, '/logout', alice.cookie)).status, 302);
    const took = await within('B refuses the session ended on A', COHERENCE_MS, async () => {
      const received = h.upstream.received.length;
      return (await get(b, '/api/me', alice.cookie)).status === 401 && h.upstream.received.length === received;
    });
    t.comment(`replica B refused the session ${took.toFixed(1)} ms after the logout on A`);
    t.equal(await activeSessions(gateways[1]!), 1);
  });

  await t.test('30 concurrent requests with an expired token on two replicas cause one refresh grant', async (t) => {
    const accessTokenTtl = (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? 600 : 2);
    const { h, urls } = await startReplicasOn(t, cluster.url, 2, { accessTokenTtl, rotateRefreshTokens: true, config: { session: { keyPrefix: 'refresh' } } });
    const alice = await signIn(urls[0]!, { user: 'alice' });
    for (const url of urls) t.equal((await get(url, '/api/me', alice.cookie)).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const statuses = await Promise.all(Array.from({ length: 30 }, async (_, i) => (await get(urls[i % 2]!, `/api/me?i=${i}`, alice.cookie)).status));
    t.strictSame([...new Set(statuses)], [200], 'every request succeeded');
    t.equal(h.as.grants.refreshToken, 1, 'exactly one refresh grant at the AS');
    t.equal(h.as.grants.refreshTokenErrors, 0);
  });
});
