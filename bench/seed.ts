import { createHash } from 'node:crypto';
import sqlite3 from 'sqlite3';
import { openBackend } from '../src/session/backends/open.js';
import { KEY_PREFIX, NAMESPACE } from '../src/session/keys.js';
import { Sealer } from '../src/session/seal.js';
import { hashSessionId } from '../src/session/session-id.js';
import { SessionStore, type TokenRecord } from '../src/session/store.js';

/** Sessions written straight into a gateway's SQLite file, one user per session. */
export interface Seeded {
  count: number;
  /** The session id (cookie value) of session i, derived, so nothing is kept for a million. */
  sessionId(i: number): string;
  /** `session_id=<id>` of session i. */
  cookie(i: number): string;
  /** The hash the store keys session i under. */
  hash(i: number): string;
  seconds: number;
}

const ROWS_PER_STATEMENT = 500;
const DAY_MS = 24 * 60 * 60 * 1000;
/** About the size of the RS256 ID token the demo AS issues, so records weigh what real ones do. */
const ID_TOKEN_LIKE = `eyJhbGciOiJSUzI1NiJ9.${'x'.repeat(600)}.${'y'.repeat(342)}`;

/**
 * Writes `count` sessions and their users' token records into the keyv
 * table the gateway reads (src/session/backends/sqlite.ts: table `gatehouse`, key
 * `gatehouse:s:<hash>` -> `{"value":{"userId","expiresAt"},"expires"}` and
 * `gatehouse:t:<userId>` -> `{"value":"<sealed record>","expires"}`), in one
 * raw transaction through sqlite3: through the store it would be one
 * transaction per key. Token records are sealed with the gateway's own Sealer
 * and key, then a sample is read back through SessionStore to prove the format.
 */
export async function seedSessions(path: string, count: number, sessionKey: string): Promise<Seeded> {
  const started = Date.now();
  const salt = createHash('sha256').update(`${path}:${started}`).digest('base64url');
  const sessionId = (i: number) => createHash('sha256').update(`${salt}:${i}`).digest('base64url');
  const sealer = new Sealer([sessionKey]);
  const expiresAt = started + DAY_MS;
  const db = await open(path);
  await run(db, 'PRAGMA journal_mode=OFF');
  await run(db, 'PRAGMA synchronous=OFF');
  await run(db, 'PRAGMA cache_size=-262144');
  await run(db, 'CREATE TABLE IF NOT EXISTS gatehouse(key VARCHAR(255) PRIMARY KEY, value TEXT )');
  await run(db, 'BEGIN');
  const statement = `INSERT INTO gatehouse (key, value) VALUES ${Array(ROWS_PER_STATEMENT).fill('(?, ?)').join(', ')}`;
  let params: string[] = [];
  const flush = async (sql: string) => {
    await run(db, sql, params);
    params = [];
  };
  for (let i = 0; i < count; i += 1) {
    const hash = hashSessionId(sessionId(i));
    const userId = `bench-user-${i}`;
    const record: TokenRecord = {
      userId,
      accessToken: hash.slice(0, 43),
      refreshToken: hash.slice(1, 44),
      expiresAt,
      lifetime: DAY_MS / 1000,
      idToken: ID_TOKEN_LIKE,
      claims: { sub: userId, name: `User ${i}`, email: `${userId}@example.com`, email_verified: true },
      sessions: { [hash]: expiresAt },
    };
    params.push(`${NAMESPACE}:${KEY_PREFIX.session}${hash}`, JSON.stringify({ value: { userId, expiresAt }, expires: expiresAt }));
    params.push(`${NAMESPACE}:${KEY_PREFIX.tokens}${userId}`, JSON.stringify({ value: sealer.seal(JSON.stringify(record), `tokens:${userId}`), expires: expiresAt }));
    if (params.length === ROWS_PER_STATEMENT * 2) await flush(statement);
  }
  if (params.length > 0) await flush(`INSERT INTO gatehouse (key, value) VALUES ${Array(params.length / 2).fill('(?, ?)').join(', ')}`);
  await run(db, 'COMMIT');
  await run(db, 'PRAGMA journal_mode=WAL');
  await new Promise<void>((resolve, reject) => db.close((err) => (err ? reject(err) : resolve())));
  const seeded: Seeded = {
    count,
    sessionId,
    cookie: (i) => `session_id=${sessionId(i)}`,
    hash: (i) => hashSessionId(sessionId(i)),
    seconds: (Date.now() - started) / 1000,
  };
  await verify(path, seeded, sessionKey);
  return seeded;
}

/** Reads the first, a middle and the last session back through the gateway's store. */
async function verify(path: string, seeded: Seeded, sessionKey: string): Promise<void> {
  const store = new SessionStore(await openBackend(`sqlite://${path}`, '/'), new Sealer([sessionKey]), 1);
  try {
    for (const i of [0, seeded.count >> 1, seeded.count - 1]) {
      const session = await store.getSession(seeded.hash(i));
      const tokens = session && (await store.getTokens(session.userId));
      if (!tokens || tokens.sessions[seeded.hash(i)] === undefined) throw new Error(`seeded session ${i} does not read back through SessionStore`);
    }
  } finally {
    await store.close();
  }
}

function open(path: string): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(path, (err) => (err ? reject(err) : resolve(db)));
  });
}

function run(db: sqlite3.Database, sql: string, params: unknown[] = []): Promise<void> {
  return new Promise((resolve, reject) => db.run(sql, params, (err) => (err ? reject(err) : resolve())));
}
