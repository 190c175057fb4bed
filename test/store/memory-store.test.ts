import t from 'tap';
import { storeConformance } from './store-conformance.js';

/** README "Storage": the memory:// backend passes the store conformance suite. */
t.test('memory://', (t) => storeConformance(t, 'memory://', process.cwd()));

/**
 * README "Limits under abuse": `memory://` expires entries by itself like the other stores.
 * Keyv drops an expired entry only when it is read; the sweep the store runs
 * (every 10 minutes, called here directly) deletes those never read again.
 */
t.test('memory:// deletes expired entries that are never read again', async (t) => {
  const { randomBytes } = await import('node:crypto');
  const { openBackend } = await import('../../src/session/backends/open.js');
  const { SessionStore } = await import('../../src/session/store.js');
  const { Sealer } = await import('../../src/session/seal.js');
  const backend = await openBackend('memory://', process.cwd());
  const store = new SessionStore(backend, new Sealer([randomBytes(32).toString('base64')]), 100);
  t.teardown(() => store.close());
  const map = backend.keyv.store as Map<string, unknown>;
  for (let i = 0; i < 50; i += 1) {
    t.ok(await store.claimOnce(`state:${i}`, 30), 'a single-use marker');
    await store.saveSession(`hash-${i}`, { userId: 'u', expiresAt: Date.now() + 30 });
  }
  await store.saveSession('long-lived', { userId: 'u', expiresAt: Date.now() + 60_000 });
  t.equal(map.size, 101, 'entries written');
  await new Promise((resolve) => setTimeout(resolve, 60));
  await store.sweep();
  t.equal(map.size, 1, 'only the live session is left');
  t.ok(await store.getSession('long-lived'));
});
