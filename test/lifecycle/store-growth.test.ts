import { createRequire } from 'node:module';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

// The driver @keyv/sqlite itself uses, to read the file as an operator would.
const sqlite3 = createRequire(import.meta.url)('sqlite3') as typeof import('sqlite3');

interface Row {
  key: string;
  expires: number | null;
}

function rows(path: string): Promise<Row[]> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(path, sqlite3.OPEN_READONLY, (err) => {
      if (err) return reject(err);
      db.all("SELECT key, json_extract(value, '$.expires') AS expires FROM gatehouse", (err2, result) => {
        db.close();
        if (err2) reject(err2);
        else resolve(result as Row[]);
      });
    });
  });
}

/** The kind of a stored key: s (session), t (token record), l (logout link), u (single-use marker). */
function kindOf(key: string): string {
  return key.split(':')[1] ?? '';
}

/**
 * Nothing piles up in the store: sessions, token records and back-channel
 * logout links carry the session's TTL, so once `session.ttl` has passed
 * the sweep (every 10 minutes by itself; run here at once) deletes their
 * rows from the SQLite file. Only the single-use markers of recent sign-ins
 * remain, and they carry their own expiry (10 minutes).
 */
t.test('expired sessions and their token records leave the sqlite file', async (t) => {
  const ttlSeconds = 2;
  const h = await startHarness({ backchannelLogout: true, config: { session: { ttl: ttlSeconds } } });
  t.teardown(() => h.close());
  const file = join(h.dir, 'sessions.sqlite');
  const users = ['ana', 'ben', 'cy', 'dee', 'eli', 'fay'];
  const cookies: string[] = [];
  for (const user of users) {
    for (let browser = 0; browser < 3; browser += 1) cookies.push((await signIn(h.url, { user })).cookie);
  }
  const signedInUntil = Date.now() + ttlSeconds * 1000;
  const before = await rows(file);
  const count = (list: Row[], kind: string) => list.filter((row) => kindOf(row.key) === kind).length;
  t.equal(count(before, 's'), 18, '18 session rows');
  t.equal(count(before, 't'), 6, 'one token record per user');
  const links = (kind: string) => before.filter((row) => row.key.split(':').slice(1, 3).join(':') === `l:${kind}`).length;
  t.equal(links('sid'), 18, 'one sid link per session');
  // README "Ending sessions": how the session API and security events find a user and a session.
  t.equal(links('handle'), 18, 'one handle link per session');
  t.equal(links('user'), 6, 'one user link per user');
  t.equal(links('email'), 6, 'one email link per user');
  t.equal(count(before, 'l'), 48, 'no other link');
  t.ok(
    before.every((row) => typeof row.expires === 'number'),
    'every row carries an expiry',
  );
  t.ok(
    before.filter((row) => ['s', 't', 'l', 'v'].includes(kindOf(row.key))).every((row) => row.expires! <= signedInUntil + 50),
    'sessions, token records and links expire with the sessions',
  );

  await sleep(Math.max(0, signedInUntil - Date.now()) + 300);
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: cookies[0]! } })).status, 401, 'an expired session is a 401');
  await h.gateway.context.store.sweep();

  const after = await rows(file);
  t.strictSame(
    after.filter((row) => kindOf(row.key) !== 'u').map((row) => row.key),
    [],
    'no session, token record or link row remains',
  );
  t.ok(after.length <= 18, `only single-use markers remain (${after.length})`);
  t.ok(
    after.every((row) => typeof row.expires === 'number' && row.expires <= Date.now() + 10 * 60 * 1000),
    'and they expire within 10 minutes',
  );
  for (const cookie of cookies.slice(1, 4)) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401);
});
