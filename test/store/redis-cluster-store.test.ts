import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBackend } from '../../src/session/backends/open.js';
import { redisHaMissing, startRedisCluster, command } from '../helpers/redis-ha.js';
import { storeConformance } from './store-conformance.js';

/**
 * README, "Redis Sentinel and Cluster": a Cluster of three redis-server
 * --cluster-enabled nodes made by redis-cli --cluster create passes the
 * store conformance suite, and every key gatehouse writes is in one hash
 * slot (the multi-key MULTI, the lock and the session set would otherwise
 * fail with CROSSSLOT).
 */
t.test('redis+cluster://', { skip: redisHaMissing }, async (t) => {
  const cluster = await startRedisCluster();
  t.teardown(() => cluster.close());
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cluster-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  await t.test('store conformance', (t) => storeConformance(t, cluster.url, dir));

  await t.test('every key is in the one slot of the hash tag {gatehouse}', async (t) => {
    const backend = await openBackend(cluster.url, dir);
    t.teardown(() => backend.close?.() ?? backend.keyv.disconnect());
    await backend.keyv.set('s:probe', 'x', 60_000);
    t.equal(await backend.claimOnce!('state:probe', 60_000), true);
    const release = await backend.lock!('user:probe');
    const slot = Number(await command(cluster.nodes[0]!.port, 'CLUSTER', 'KEYSLOT', '{gatehouse}'));
    const keys: string[] = [];
    for (const { port } of cluster.nodes) keys.push(...((await command(port, 'KEYS', '*')) as string[]));
    await release();
    t.ok(keys.length >= 4, `keys written: ${keys.join(' ')}`);
    for (const key of keys) {
      t.ok(key.startsWith('{gatehouse}:'), `${key} carries the hash tag`);
      t.equal(Number(await command(cluster.nodes[0]!.port, 'CLUSTER', 'KEYSLOT', key)), slot, `${key} is in slot ${slot}`);
    }
  });
});
