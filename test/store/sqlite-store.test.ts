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

/**
 * The joined session read parses keyv's JSON without keyv's reviver unless
 * an escape may be in it (src/session/backends/sqlite.ts): values with
 * strings that start with `:` (keyv writes them `::…`) and Buffers must
 * still read back exactly as keyv.get gives them.
 */
t.test('the joined session read gives what keyv.get gives, escaped strings included', async (t) => {
  const { openBackend } = await import('../../src/session/backends/open.js');
  const { mayHoldEscapes } = await import('../../src/session/backends/sqlite.js');
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const backend = await openBackend(`sqlite://${join(dir, 'read.sqlite')}`, dir);
  t.teardown(async () => {
    await backend.close?.();
    await backend.keyv.disconnect();
  });
  const cases: Array<{ name: string; session: Record<string, unknown>; tokens: unknown }> = [
    { name: 'plain', session: { userId: 'u1', expiresAt: 1e15, sid: 'abc' }, tokens: 'v1.sealed' },
    { name: 'a sid starting with a colon', session: { userId: 'u2', expiresAt: 1e15, sid: ':odd', acr: '::two' }, tokens: ':v1.colon' },
    { name: 'a quoted colon inside a string', session: { userId: 'u3', expiresAt: 1e15, sid: 'say "::" and ":base64:x"' }, tokens: 'v1.x' },
    { name: 'a Buffer', session: { userId: 'u4', expiresAt: 1e15, sid: 'x' }, tokens: Buffer.from('bytes') },
  ];
  for (const { name, session, tokens } of cases) {
    const userId = session.userId as string;
    await backend.keyv.set(`s:${userId}`, session);
    await backend.keyv.set(`t:${userId}`, tokens);
    const read = await backend.readSession(`s:${userId}`);
    t.same(read.session, await backend.keyv.get(`s:${userId}`), `${name}: the session as keyv.get reads it`);
    t.same(read.session, session, `${name}: the session as written`);
    t.same(read.tokens, tokens, `${name}: the token record as written`);
  }
  t.notOk(mayHoldEscapes('{"value":{"userId":"u","sid":"a:b"},"expires":null}'), 'a colon inside a string needs no reviver');
  t.ok(mayHoldEscapes('{"value":"::x","expires":null}'), 'an escaped colon string does');
  t.ok(mayHoldEscapes('{"value":":base64:Ynl0ZXM=","expires":null}'), 'and so does a Buffer');
});
