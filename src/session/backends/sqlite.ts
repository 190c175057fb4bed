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
  // A second connection holds this one statement prepared: a cold request then costs one thread-pool
  // round trip, not a prepare, a step and a finalize (BENCHMARKS.md "Cold session"). WAL shows it every committed write.
  const reader = await openDatabase(path);
  const readBoth = reader.prepare(
    "SELECT s.value AS session, t.value AS tokens FROM gatehouse s LEFT JOIN gatehouse t ON t.key = ? || json_extract(s.value, '$.value.userId') WHERE s.key = ?",
  );
  const tokensPrefix = `${NAMESPACE}:${KEY_PREFIX.tokens}`;
  const live = async (raw: string | null | undefined): Promise<unknown> => {
    if (typeof raw !== 'string') return undefined;
    const data = (await keyv.deserializeData(raw)) as { value?: unknown; expires?: number | null } | undefined;
    return data && !(typeof data.expires === 'number' && Date.now() > data.expires) ? data.value : undefined;
  };
  return {
    keyv,
    readSession: async (sessionKey) => {
      const row = await new Promise<{ session: string; tokens: string | null } | undefined>((resolve, reject) => {
        readBoth.get(tokensPrefix, `${NAMESPACE}:${sessionKey}`, (error: Error | null, found?: { session: string; tokens: string | null }) =>
          error ? reject(error) : resolve(found),
        );
      });
      return { session: await live(row?.session), tokens: await live(row?.tokens) };
    },
    close: async () => {
      await new Promise<void>((resolve) => readBoth.finalize(() => resolve()));
      await new Promise<void>((resolve, reject) => reader.close((error) => (error ? reject(error) : resolve())));
    },
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

function openDatabase(path: string): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const database = new sqlite3.Database(path, sqlite3.OPEN_READWRITE, (error) => {
      if (error) return reject(error);
      database.configure('busyTimeout', 5000);
      resolve(database);
    });
  });
}
