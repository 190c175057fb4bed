import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import Keyv from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
import sqlite3 from 'sqlite3';
import type { Backend } from './backend.js';
import { KEY_PREFIX, NAMESPACE } from '../keys.js';

/** Resolves `sqlite://./data/x.sqlite` against cwd; `sqlite:///abs/x.sqlite` is absolute. */
export function sqlitePath(url: string, cwd: string): string {
  const path = decodeURIComponent(url.slice('sqlite://'.length));
  return isAbsolute(path) ? path : resolve(cwd, path);
}

/** A backend in one SQLite file (`sqlite://PATH`), for a single replica. */
export async function openSqlite(path: string): Promise<Backend> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // The file holds sealed tokens and session hashes: readable by gatehouse only
  // (SECURITY.md "What it assumes"). Created here with 0600 before SQLite opens
  // it, whatever the umask; SQLite gives its -wal and -shm files the same mode
  // (test/store/sqlite-store.test.ts). An existing file keeps the mode its operator chose.
  closeSync(openSync(path, 'a', 0o600));
  const adapter = new KeyvSqlite({ uri: `sqlite://${path}`, table: 'gatehouse', busyTimeout: 5000 });
  // WAL lets readers proceed during a write; NORMAL sync is durable across process crashes.
  await adapter.query('PRAGMA journal_mode=WAL');
  await adapter.query('PRAGMA synchronous=NORMAL');
  const keyv = new Keyv({ store: adapter, namespace: NAMESPACE, throwOnErrors: true });
  const expires = "json_extract(value, '$.expires')";
  // keyv stores `{"value": ..., "expires": ms | null}` as JSON: the session's user id names the token record's key.
  const tokensPrefix = `${NAMESPACE}:${KEY_PREFIX.tokens}`;
  // A second connection holds this one statement prepared: a cold request costs one lookup, not a prepare,
  // a step and a finalize (BENCHMARKS.md "Cold session"). WAL shows it every committed write.
  const reader = await openReader(path, READ_BOTH);
  const deserialize = keyv.deserialize ?? JSON.parse;
  const live = (raw: string | null | undefined): unknown => {
    if (typeof raw !== 'string') return undefined;
    const data = (mayHoldEscapes(raw) ? deserialize(raw) : JSON.parse(raw)) as { value?: unknown; expires?: number | null } | undefined;
    return data && !(typeof data.expires === 'number' && Date.now() > data.expires) ? data.value : undefined;
  };
  return {
    keyv,
    readSession: async (sessionKey) => {
      const row = await reader.get(tokensPrefix, `${NAMESPACE}:${sessionKey}`);
      return { session: live(row?.session), tokens: live(row?.tokens) };
    },
    setMany: async (entries) => {
      const now = Date.now();
      const values: Array<string> = [];
      // keyv's own row format (a number needs no escape); at most SET_MANY_ROWS rows per statement (SQLite's bound-parameter limit).
      for (const { key, value, ttlMs } of entries) values.push(`${NAMESPACE}:${key}`, JSON.stringify({ value, expires: now + ttlMs }));
      for (let at = 0; at < values.length; at += 2 * SET_MANY_ROWS) {
        const chunk = values.slice(at, at + 2 * SET_MANY_ROWS);
        await adapter.query(
          `INSERT INTO gatehouse (key, value) VALUES ${Array(chunk.length / 2).fill('(?, ?)').join(', ')} ON CONFLICT(key) DO UPDATE SET value=excluded.value`,
          ...chunk,
        );
      }
    },
    close: () => reader.close(),
    shared: false,
    count: async (prefix) => {
      const rows = (await adapter.query(
        `SELECT count(*) AS live FROM gatehouse WHERE key LIKE ? AND (${expires} IS NULL OR ${expires} > ?)`,
        `${NAMESPACE}:${prefix}%`,
        Date.now(),
      )) as Array<{ live: number }>;
      return rows[0]?.live ?? 0;
    },
    sweep: async () => {
      await adapter.query(`DELETE FROM gatehouse WHERE ${expires} IS NOT NULL AND ${expires} <= ?`, Date.now());
    },
  };
}

/**
 * Whether keyv's serializer may have escaped a string in `raw`: it writes a
 * string that starts with `:` as `::…` and a Buffer as `:base64:…`, and its
 * deserializer undoes both with a JSON.parse reviver, which costs several
 * times a plain parse on a sealed token record (BENCHMARKS.md "Cold
 * session"). Either escape puts `":` right after the opening quote of a
 * string value (a key is followed by `":` and then a value, never by `:`),
 * so without `"::` or `":base64:` the plain parse gives the same value
 * (test/store/sqlite-store.test.ts).
 */
export function mayHoldEscapes(raw: string): boolean {
  return raw.includes('"::') || raw.includes('":base64:');
}

/** Rows per INSERT of `setMany`: two parameters each, below SQLite's default limit of 32,766. */
const SET_MANY_ROWS = 500;

/** keyv stores `{"value": ..., "expires": ms | null}` as JSON: the session's user id names the token record's key. */
const READ_BOTH =
  "SELECT s.value AS session, t.value AS tokens FROM gatehouse s LEFT JOIN gatehouse t ON t.key = ? || json_extract(s.value, '$.value.userId') WHERE s.key = ?";

interface Row {
  session: string;
  tokens: string | null;
}

/** One prepared statement on its own connection. */
interface Reader {
  get(tokensPrefix: string, sessionKey: string): Promise<Row | undefined>;
  close(): Promise<void>;
}

/**
 * Node 24's built-in SQLite when it has it without a warning: a primary-key
 * lookup in the page cache takes microseconds, less than handing it to the
 * thread pool and back as sqlite3 does (BENCHMARKS.md "Cold session").
 * Elsewhere (Node 22, where node:sqlite warns that it is experimental) the
 * statement runs on a sqlite3 connection.
 */
async function openReader(path: string, sql: string): Promise<Reader> {
  const builtin = Number(process.versions.node.split('.')[0]) >= 24 ? process.getBuiltinModule('node:sqlite') : undefined;
  if (builtin !== undefined) {
    const database = new builtin.DatabaseSync(path, { readOnly: true, timeout: 5000 });
    const statement = database.prepare(sql);
    return {
      get: async (tokensPrefix, sessionKey) => statement.get(tokensPrefix, sessionKey) as Row | undefined,
      close: async () => database.close(),
    };
  }
  const database = await new Promise<sqlite3.Database>((resolve, reject) => {
    const opened = new sqlite3.Database(path, sqlite3.OPEN_READWRITE, (error) => {
      if (error) return reject(error);
      opened.configure('busyTimeout', 5000);
      resolve(opened);
    });
  });
  const statement = database.prepare(sql);
  return {
    get: (tokensPrefix, sessionKey) =>
      new Promise((resolve, reject) => {
        statement.get(tokensPrefix, sessionKey, (error: Error | null, found?: Row) => (error ? reject(error) : resolve(found)));
      }),
    close: async () => {
      await new Promise<void>((resolve) => statement.finalize(() => resolve()));
      await new Promise<void>((resolve, reject) => database.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
