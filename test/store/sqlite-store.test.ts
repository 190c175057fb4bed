import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storeConformance } from './store-conformance.js';

/** README "Storage": the sqlite:// backend passes the store conformance suite. */
t.test('sqlite://', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return storeConformance(t, `sqlite://${join(dir, 'store.sqlite')}`, dir);
});

/**
 * SECURITY.md: the SQLite file is readable by gatehouse only. Created 0600
 * (its directory 0700) even under a permissive umask, and SQLite's -wal and
 * -shm files follow the database file's mode.
 */
t.test('a new sqlite file and its journal files are private to the owner', async (t) => {
  const { statSync, existsSync } = await import('node:fs');
  const { openBackend } = await import('../../src/session/backends/open.js');
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const previous = process.umask(0o000);
  t.teardown(() => void process.umask(previous));
  const backend = await openBackend('sqlite://./data/private.sqlite', dir);
  t.teardown(() => backend.keyv.disconnect());
  await backend.keyv.set('probe', 'value');
  const path = join(dir, 'data', 'private.sqlite');
  t.equal(statSync(path).mode & 0o777, 0o600, 'the database file is 0600');
  t.equal(statSync(join(dir, 'data')).mode & 0o777, 0o700, 'a directory it creates is 0700');
  for (const suffix of ['-wal', '-shm']) {
    if (existsSync(path + suffix)) t.equal(statSync(path + suffix).mode & 0o777, 0o600, `the ${suffix} file is 0600`);
  }
});
