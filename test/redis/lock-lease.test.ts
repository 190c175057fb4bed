import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { openBackend } from '../../src/session/backends/open.js';
import { lockFence } from '../../src/session/backends/backend.js';
import { Sealer } from '../../src/session/seal.js';
import { SessionStore } from '../../src/session/store.js';
import { tokenRecord } from '../helpers/token-record.js';
import { redisMissing, startRedis, type RedisServer } from '../helpers/redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function openStore(t: Test, redis: RedisServer, prefix: string, sealer: Sealer) {
  const backend = await openBackend(redis.url, process.cwd(), prefix, { lockTtlMs: 300, lockWaitMs: 400 });
  const store = new SessionStore(backend, sealer, 100);
  t.teardown(() => store.close());
  return store;
}

/**
 * The user lock shared by replicas through Redis (README "Run several
 * replicas"), against a real redis-server, with a lease of 300 ms and a wait
 * of 400 ms so the test does not sleep for the production 30 s:
 * - a lock held too long by another replica fails only the request that
 *   waited (GH_ERR_STORE_BUSY): the store stays ready and keeps serving;
 * - the lease is extended while its holder runs, however long that takes;
 * - a write made under a lock that lapsed and was taken by another replica
 *   is refused atomically, so it cannot overwrite the newer record.
 */
t.test('shared lock: busy, leased, fenced', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const prefix = `lease-${randomBytes(4).toString('hex')}`;
  const sealer = new Sealer([randomBytes(32).toString('base64')]);
  const store = await openStore(t, redis, prefix, sealer);
  const other = await openStore(t, redis, prefix, sealer);

  t.test('a lock held by another replica past the wait fails this request only', async (t) => {
    await store.saveSession('someone-else', { userId: 'v', expiresAt: Date.now() + 60_000 });
    t.equal(await redis.command('SET', `${prefix}:lock:user:held`, 'another-replica', 'PX', '60000'), '+OK');
    await t.rejects(store.withLock('user:held', async () => 'ran'), { code: 'GH_ERR_STORE_BUSY', statusCode: 503 });
    t.ok(store.ready, 'the store is still ready');
    t.ok(await store.getSession('someone-else'), "other users' requests are served");
    t.equal(await store.withLock('user:free', async () => 'ran'), 'ran', 'other locks are taken');
  });

  t.test('the lease is extended while its holder runs', async (t) => {
    const result = await store.withLock('user:slow', async () => {
      await sleep(1000);
      const ttl = await redis.command('PTTL', `${prefix}:lock:user:slow`);
      t.match(ttl, /^:\d+/, `the lock is still there after 3 leases (PTTL ${ttl.trim()})`);
      t.ok(Number(ttl.slice(1)) > 0);
      await store.saveTokens(tokenRecord('slow', 'written-under-lock'));
      return 'done';
    });
    t.equal(result, 'done');
    t.equal((await other.getTokens('slow', true))?.accessToken, 'written-under-lock');
    t.equal(await redis.command('EXISTS', `${prefix}:lock:user:slow`), ':0', 'released afterwards');
  });

  t.test('a write under a lock that was taken over is refused', async (t) => {
    await other.saveTokens(tokenRecord('late', 'old'));
    const attempt = store.withLock('user:late', async () => {
      // The lease lapses (a paused process, say) and another replica takes the lock and writes a newer record.
      await redis.command('SET', `${prefix}:lock:user:late`, 'another-replica', 'PX', '60000');
      // (Outside this task's lock context, as another process would be.)
      await lockFence.exit(() => other.saveTokens(tokenRecord('late', 'newer')));
      await store.saveTokens(tokenRecord('late', 'stale'));
    });
    await t.rejects(attempt, { code: 'GH_ERR_STORE_BUSY' }, 'the late holder is told its write was not made');
    t.equal((await other.getTokens('late', true))?.accessToken, 'newer', 'the newer record is kept');
    t.ok(store.ready, 'and the store is not marked down');
    await t.rejects(
      store.withLock('user:late', async () => {
        await redis.command('SET', `${prefix}:lock:user:late`, 'yet-another', 'PX', '60000');
        await store.deleteTokens('late');
      }),
      { code: 'GH_ERR_STORE_BUSY' },
      'a fenced delete is refused too',
    );
    t.ok(await other.getTokens('late', true), 'the record is still there');
  });
});
