import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBackend } from '../../src/session/backends/open.js';
import { Sealer } from '../../src/session/seal.js';
import { SessionStore, type TokenRecord } from '../../src/session/store.js';
import { tokenRecord } from '../helpers/token-record.js';

// src/session/store.ts (cachedTokens): the cache keeps a token record without its ID token (no proxied request
// reads it; about a kilobyte of every cached entry); the backend keeps it, and a read past the cache returns it.
const ID_TOKEN = `eyJhbGciOiJFUzI1NiJ9.${'x'.repeat(600)}.signature`;

function withIdToken(userId: string, accessToken: string, session: string): TokenRecord {
  return { ...tokenRecord(userId, accessToken), idToken: ID_TOKEN, claims: { sub: userId }, sessions: { [session]: Date.now() + 60_000 } };
}

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cached-tokens-'));
const backend = await openBackend(`sqlite://${join(dir, 'sessions.sqlite')}`, dir, 'cached-tokens');
const sealer = new Sealer([randomBytes(32).toString('base64')]);
const store = new SessionStore(backend, sealer, 100);
t.teardown(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

t.test('a saved record is cached without its ID token; a read past the cache returns it', async (t) => {
  await store.saveTokens(withIdToken('alice', 'at-1', 'h-alice'));
  const cached = store.peekTokens('alice');
  t.ok(cached, 'the written record is cached');
  t.equal(cached!.idToken, undefined, 'the cached record holds no ID token');
  t.equal(cached!.accessToken, 'at-1', 'and everything a proxied request reads');
  t.same(cached!.claims, { sub: 'alice' });
  t.ok(cached!.sessions['h-alice']);
  t.equal((await store.getTokens('alice'))!.idToken, undefined, 'a read served by the cache has none either');
  t.equal((await store.getTokens('alice', true))!.idToken, ID_TOKEN, 'the stored record keeps it');
  t.equal(store.peekTokens('alice')!.idToken, undefined, 'reading past the cache caches the record without it');
});

t.test('a record cached on a cold read (with its session, or alone) holds no ID token, and a rewrite keeps it in the store', async (t) => {
  // Another store on the same backend wrote it: this one's cache is cold (the backend is closed once, by `store`).
  const writer = new SessionStore(backend, sealer, 100);
  await writer.saveTokens(withIdToken('bob', 'at-2', 'h-bob'));
  await writer.saveSession('h-bob', { userId: 'bob', expiresAt: Date.now() + 60_000 });
  t.equal(store.peekTokens('bob'), undefined, 'not cached yet');
  t.ok(await store.getSession('h-bob'), 'the session read');
  const cached = store.peekTokens('bob');
  t.equal(cached?.accessToken, 'at-2', 'the token record read with the session is cached');
  t.equal(cached!.idToken, undefined, 'without the ID token');

  await writer.saveTokens(withIdToken('carol', 'at-3', 'h-carol'));
  t.equal((await store.getTokens('carol'))!.idToken, ID_TOKEN, 'a read that had to go to the backend returns the whole record');
  t.equal(store.peekTokens('carol')!.idToken, undefined, 'and caches it without the ID token');

  // A read-modify-write (as a refresh or a logout does) starts from the stored record: the ID token survives it.
  const stored = (await store.getTokens('bob', true))!;
  await store.saveTokens({ ...stored, accessToken: 'at-2b' });
  t.equal(store.peekTokens('bob')!.accessToken, 'at-2b');
  t.equal((await writer.getTokens('bob', true))!.idToken, ID_TOKEN, 'the rewritten record still has its ID token in the store');
});
