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
