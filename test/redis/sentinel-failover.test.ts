import t from 'tap';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { redisHaMissing, startSentinelSet } from '../helpers/redis-ha.js';
import { get, signInAcross, startReplicasOn, within } from './replicas.js';

/**
 * README, "Redis Sentinel and Cluster": two gateways on
 * redis+sentinel:// (a master with one replica, three sentinels). The
 * master is killed (SIGKILL) under load: the sentinels promote the replica,
 * the gateways follow; meanwhile requests get 503 and nothing else, then
 * every session works again (none lost: the replica had them), and one
 * refresh stays one refresh across the gateways on the new master. The
 * figures (recovery time, failed requests, sessions lost) are printed as
 * test comments.
 */

const USERS = 12;

t.test('a Sentinel failover under load: 503 only, then the same sessions, none lost; one refresh across gateways', { skip: redisHaMissing }, async (t) => {
  const sentinel = await startSentinelSet();
  t.teardown(() => sentinel.close());
  // Sign-in tokens live 2 s, refreshed ones 10 minutes: each user refreshes once, before the failover.
  const accessTokenTtl = (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? 600 : 2);
  const { h, urls } = await startReplicasOn(t, sentinel.url, 2, { accessTokenTtl, rotateRefreshTokens: true });

  const cookies: string[] = [];
  for (let i = 0; i < USERS; i += 1) {
    const signed = await signInAcross(urls[i % 2]!, urls[(i + 1) % 2]!, `user-${i}`);
    t.equal(signed.status, 302, `user-${i} signed in`);
    cookies.push(signed.cookie!);
  }
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const warm = await Promise.all(cookies.map(async (cookie, i) => (await get(urls[i % 2]!, '/api/me', cookie)).status));
  t.strictSame([...new Set(warm)], [200], 'every user refreshed once and was served');
  t.equal(h.as.grants.refreshToken, USERS, 'one refresh per user');
  await sentinel.replicated();
  const oldMaster = sentinel.master.port;

  // Load: every user, alternately on both gateways, as fast as the answers come.
  const results: Array<{ at: number; status: number; user: number }> = [];
  let killedAt = 0;
  let stop = false;
  const load = Promise.all(
    cookies.map(async (cookie, user) => {
      for (let n = 0; !stop; n += 1) {
        const status = await get(urls[(user + n) % 2]!, `/api/me?n=${n}`, cookie).then(
          (r) => r.status,
          () => 0,
        );
        results.push({ at: performance.now(), status, user });
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 1000));
  killedAt = performance.now();
  await sentinel.master.kill();
  t.comment(`master on port ${oldMaster} killed`);

  // Recovered: the sentinels name the replica, and every user has had a 200 since.
  await within('failover', 60_000, async () => (await sentinel.masterPort()) === sentinel.replica.port, 100);
  await within('every user served again', 60_000, async () => cookies.every((_, user) => results.some((r) => r.user === user && r.at > killedAt && r.status === 200 && afterLastFailure(r))), 100);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  stop = true;
  await load;

  function afterLastFailure(r: { at: number; user: number }): boolean {
    return !results.some((other) => other.user === r.user && other.status !== 200 && other.at > r.at);
  }
  const during = results.filter((r) => r.at > killedAt);
  const failed = during.filter((r) => r.status !== 200);
  const lastFailure = failed.reduce((last, r) => Math.max(last, r.at), killedAt);
  const lost = cookies.filter((_, user) => results.some((r) => r.user === user && r.at > killedAt && r.status === 401)).length;
  t.comment(`failover figures: recovered ${Math.round(lastFailure - killedAt)} ms after the kill; ${failed.length} of ${during.length} requests failed; ${lost} of ${USERS} sessions lost`);
  t.strictSame([...new Set(failed.map((r) => r.status))].filter((status) => status !== 503), [], 'every failed request got 503 (no other 5xx, no 401, no connection error)');
  t.equal(lost, 0, 'no session lost');
  t.ok(during.length > failed.length, 'requests succeeded after the failover');

  const after = await Promise.all(cookies.map(async (cookie, i) => (await get(urls[(i + 1) % 2]!, '/api/me', cookie)).status));
  t.strictSame([...new Set(after)], [200], 'every session works on both gateways after the failover');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'no refresh token was used twice');

  // Invalidation on the new master: a logout on one gateway is seen by the other within 200 ms.
  const logout = await fetch(`${urls[0]}/logout`, { headers: { cookie: cookies[0]! }, redirect: 'manual' });
  t.equal(logout.status, 302);
  const seenIn = await within('logout seen by the other gateway', 200, async () => (await get(urls[1]!, '/api/me', cookies[0])).status === 401, 5);
  t.comment(`logout seen by the other gateway after ${Math.round(seenIn)} ms`);

  // One refresh stays one refresh on the new master: a new user, 20 concurrent requests on both gateways once the token is stale.
  const late = await signInAcross(urls[0]!, urls[1]!, 'late-user');
  t.equal(late.status, 302);
  const grants = h.as.grants.refreshToken;
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const storm = await Promise.all(Array.from({ length: 20 }, async (_, i) => (await get(urls[i % 2]!, `/api/me?storm=${i}`, late.cookie)).status));
  t.strictSame([...new Set(storm)], [200], 'every concurrent request served');
  t.equal(h.as.grants.refreshToken - grants, 1, 'exactly one refresh grant');
  t.equal(h.as.grants.refreshTokenErrors, 0);
});
