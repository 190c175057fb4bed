import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBackend } from '../../src/session/backends/open.js';
import { Sealer } from '../../src/session/seal.js';
import { SessionStore } from '../../src/session/store.js';
import { tokenRecord } from '../helpers/token-record.js';
import { redisMissing, startRedis } from '../helpers/redis.js';


/**
 * README "Storage" and the item 6: a backend read in flight while this
 * replica deletes or rewrites the same key must not put the old value back
 * into the cache. After a logout's delete has returned, every later read
 * is null; after a write has returned, every later read sees it. With
 * SQLite a delete is a SELECT then a DELETE, so a read issued just before
 * it returns the old row after the delete began.
 */
async function races(t: Test, url: string, cwd: string): Promise<void> {
  const backend = await openBackend(url, cwd, `race-${randomBytes(4).toString('hex')}`);
  const sealer = new Sealer([randomBytes(32).toString('base64')]);
  const store = new SessionStore(backend, sealer, 100);
  // Another store on the same backend writes, so the reader's cache misses as on a busy replica.
  const writer = new SessionStore(backend, sealer, 100);
  t.teardown(() => store.close());

  for (let round = 0; round < 20; round += 1) {
    const hash = `session-${round}`;
    await writer.saveSession(hash, { userId: 'u', expiresAt: Date.now() + 60_000 });
    const reading = store.getSession(hash, Date.now());
    await store.deleteSession(hash);
    await reading;
    t.equal(await store.getSession(hash), null, `round ${round}: a session deleted stays deleted`);
  }

  for (let round = 0; round < 20; round += 1) {
    const userId = `user-${round}`;
    await writer.saveTokens(tokenRecord(userId, 'old'));
    const reading = store.getTokens(userId, true);
    await store.saveTokens(tokenRecord(userId, 'new'));
    await reading;
    t.equal((await store.getTokens(userId))?.accessToken, 'new', `round ${round}: a rewritten record is read as written`);
    const readingAgain = store.getTokens(userId, true);
    await store.deleteTokens(userId);
    await readingAgain;
    t.equal(await store.getTokens(userId), null, `round ${round}: a deleted record stays deleted`);
  }
}

t.test('sqlite://', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-race-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await races(t, `sqlite://${join(dir, 'race.sqlite')}`, dir);
});

t.test('redis://', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  await races(t, redis.url, process.cwd());
});
