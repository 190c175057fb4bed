import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { openBackend } from '../../src/session/backends/open.js';
import { Sealer } from '../../src/session/seal.js';
import { hashSessionId, newSessionId } from '../../src/session/session-id.js';
import { SessionStore, type TokenRecord } from '../../src/session/store.js';

/**
 * The one conformance suite every session-store backend passes (README "Storage"):
 * what a session and a token record look like at rest, what an unknown or
 * expired id yields, replacement, deletion, single-use claims, and key
 * rotation. Each check reads through a second SessionStore on the same
 * backend, so the answer comes from the backend and not from the LRU.
 * @example t.test('memory://', (t) => storeConformance(t, 'memory://', dir));
 */
export async function storeConformance(t: Test, url: string, cwd: string): Promise<void> {
  const backend = await openBackend(url, cwd);
  const oldKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  const stores: SessionStore[] = [];
  const open = (keys: string[]) => {
    const store = new SessionStore(backend, new Sealer(keys), 100);
    stores.push(store);
    return store;
  };
  t.teardown(async () => {
    await stores[0]!.close();
    for (const store of stores.slice(1)) await store.close().catch(() => {});
  });
  const writer = open([oldKey]);
  const reader = () => open([oldKey]);
  const raw = (key: string) => backend.keyv.get(key) as Promise<unknown>;

  t.test('an unknown or expired session id yields null', async (t) => {
    t.equal(await reader().getSession(hashSessionId(newSessionId())), null);
    const hash = hashSessionId(newSessionId());
    await writer.saveSession(hash, { userId: 'ann', expiresAt: Date.now() + 60_000 });
    t.equal(await reader().getSession(hash, Date.now() + 61_000), null, 'past its expiry');
  });

  t.test('a session is stored under the hash of its id only', async (t) => {
    const id = newSessionId();
    const hash = hashSessionId(id);
    const expiresAt = Date.now() + 60_000;
    await writer.saveSession(hash, { userId: 'ann', expiresAt });
    t.match(await reader().getSession(hash), { userId: 'ann', expiresAt });
    t.notOk(JSON.stringify(await raw(`s:${hash}`)).includes(id), 'the raw id is not in the record');
    t.equal(await raw(`s:${id}`), undefined, 'nor is it a key');
    await writer.deleteSession(hash);
    t.equal(await reader().getSession(hash), null, 'deleted');
    t.equal(await writer.getSession(hash), null, 'in the writer too');
  });

  t.test('a token record is sealed at rest and bound to its user', async (t) => {
    const record = tokenRecord('ben');
    await writer.saveTokens(record);
    t.strictSame(await reader().getTokens('ben'), record);
    const sealed = await raw('t:ben');
    t.type(sealed, 'string');
    for (const secret of [record.accessToken, record.refreshToken!, record.idToken!, 'ben@example.com']) {
      t.notOk(String(sealed).includes(secret), 'no token or claim in the clear');
    }
    await backend.keyv.set('t:eve', sealed);
    t.equal(await reader().getTokens('eve'), null, "another user's sealed record is not accepted");
    t.equal(await open([newKey]).getTokens('ben'), null, 'a store without its key reads nothing');
  });

  t.test('a new record replaces the old; deletion removes it', async (t) => {
    await writer.saveTokens(tokenRecord('cat'));
    const second = tokenRecord('cat');
    await writer.saveTokens(second);
    t.equal((await reader().getTokens('cat'))?.accessToken, second.accessToken);
    await writer.deleteTokens('cat');
    t.equal(await reader().getTokens('cat'), null);
  });

  t.test('key rotation: an old key still reads, the next write uses the first key', async (t) => {
    const record = tokenRecord('dan');
    await writer.saveTokens(record);
    const rotated = open([newKey, oldKey]);
    t.strictSame(await rotated.getTokens('dan'), record, 'a record sealed with the second key is read');
    t.equal(new Sealer([newKey]).unseal(String(await raw('t:dan')), 'tokens:dan'), undefined, 'still sealed with the old key');
    await rotated.saveTokens({ ...record, accessToken: 'next' });
    const resealed = String(await raw('t:dan'));
    t.ok(new Sealer([newKey]).unseal(resealed, 'tokens:dan'), 'rewritten with the first key');
    t.equal(new Sealer([oldKey]).unseal(resealed, 'tokens:dan'), undefined, 'no longer readable with the old key alone');
  });

  t.test('readSession gives a session and its user\'s sealed token record, each as keyv.get would', async (t) => {
    const hash = hashSessionId(newSessionId());
    const record = tokenRecord('fay');
    await writer.saveSession(hash, { userId: 'fay', expiresAt: Date.now() + 60_000 });
    await writer.saveTokens(record);
    const both = await backend.readSession(`s:${hash}`);
    t.match(both.session, { userId: 'fay' });
    t.equal(both.tokens, await raw('t:fay'), 'the token record still sealed');
    t.strictSame(await backend.readSession(`s:${hashSessionId(newSessionId())}`), { session: undefined, tokens: undefined }, 'an unknown session');
    const lone = hashSessionId(newSessionId());
    await writer.saveSession(lone, { userId: 'gus', expiresAt: Date.now() + 60_000 });
    t.match(await backend.readSession(`s:${lone}`), { session: { userId: 'gus' }, tokens: undefined }, 'a user without a token record');
    await backend.keyv.set('t:gus', 'sealed', 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    t.equal((await backend.readSession(`s:${lone}`)).tokens, undefined, 'an expired token record');
    const cold = reader();
    t.match(await cold.getSession(hash), { userId: 'fay' });
    // The cache keeps the record without its ID token (src/session/store.ts, cachedTokens); the store keeps it whole.
    const { idToken, ...cachedPart } = record;
    t.strictSame(await cold.getTokens('fay'), cachedPart, 'a cold session read, then its tokens (cached: without the ID token)');
    t.equal((await cold.getTokens('fay', true))?.idToken, idToken, 'the stored record keeps its ID token');
    const keyless = open([newKey]);
    t.match(await keyless.getSession(hash), { userId: 'fay' }, 'a token record that does not unseal does not fail the session read');
    t.equal(await keyless.getTokens('fay'), null);
  });

  t.test('claimOnce answers true once', async (t) => {
    const key = `state:${randomBytes(8).toString('hex')}`;
    t.equal(await writer.claimOnce(key, 60_000), true);
    t.equal(await writer.claimOnce(key, 60_000), false);
    t.equal(await reader().claimOnce(key, 60_000), false, 'through another store as well');
  });

  t.test('the live sessions are counted where the backend can count', async (t) => {
    const count = writer.countSessions;
    if (!count) return t.equal(writer.shared, false, 'only a single-replica backend may leave the count out');
    const before = await count();
    await writer.saveSession(hashSessionId(newSessionId()), { userId: 'eli', expiresAt: Date.now() + 60_000 });
    t.equal(await count(), before + 1);
  });

  t.test('a session keeps its creation time, and its last use is recorded once a minute, apart from the session', async (t) => {
    const hash = hashSessionId(newSessionId());
    const createdAt = Date.now() - 5_000;
    const expiresAt = Date.now() + 60_000;
    await writer.saveSession(hash, { userId: 'gus', expiresAt, createdAt });
    t.match(await reader().getSession(hash), { userId: 'gus', expiresAt, createdAt }, 'createdAt is kept');
    t.equal(await reader().lastSeen(hash), undefined, 'never used yet');
    const user = open([oldKey]);
    const first = Date.now();
    user.noteSeen(hash, first, expiresAt);
    user.noteSeen(hash, first + 1_000, expiresAt);
    await waitFor(async () => (await reader().lastSeen(hash)) !== undefined);
    t.equal(await reader().lastSeen(hash), first, 'the first use of the minute is written; the next one in the minute is not');
    await writer.deleteSession(hash);
    const late = open([oldKey]);
    late.noteSeen(hash, first + 2_000, expiresAt);
    await waitFor(async () => (await reader().lastSeen(hash)) === first + 2_000);
    t.equal(await reader().getSession(hash), null, 'a use recorded after a logout never brings back the deleted session');
  });

  t.test('uses noted together are written together: every one reaches the store, its own replica sees it at once', async (t) => {
    const expiresAt = Date.now() + 60_000;
    const hashes = Array.from({ length: 700 }, () => hashSessionId(newSessionId()));
    const user = open([oldKey]);
    const first = Date.now();
    hashes.forEach((hash, i) => user.noteSeen(hash, first + i, expiresAt));
    t.equal(await user.lastSeen(hashes[7]!), first + 7, 'the replica that noted a use reads it before it is written');
    await waitFor(async () => (await reader().lastSeen(hashes.at(-1)!)) !== undefined);
    const seen: Array<number | undefined> = [];
    for (const hash of hashes) seen.push(await reader().lastSeen(hash));
    t.same(seen, hashes.map((_hash, i) => first + i), 'all 700 uses (more than one statement holds) are in the store');
  });
}

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i += 1) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('not within 1 s');
}


function tokenRecord(userId: string): TokenRecord {
  return {
    userId,
    accessToken: randomBytes(24).toString('base64url'),
    refreshToken: randomBytes(24).toString('base64url'),
    idToken: `eyJ.${randomBytes(24).toString('base64url')}.sig`,
    expiresAt: Date.now() + 60_000,
    lifetime: 60,
    claims: { sub: userId, email: `${userId}@example.com` },
    sessions: { [hashSessionId(newSessionId())]: Date.now() + 60_000 },
  };
}
