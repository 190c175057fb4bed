import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import Keyv from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
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
  const readBoth =
    "SELECT s.value AS session, t.value AS tokens FROM gatehouse s LEFT JOIN gatehouse t ON t.key = ? || json_extract(s.value, '$.value.userId') WHERE s.key = ?";
  const live = async (raw: string | null | undefined): Promise<unknown> => {
    if (typeof raw !== 'string') return undefined;
    const data = (await keyv.deserializeData(raw)) as { value?: unknown; expires?: number | null } | undefined;
    return data && !(typeof data.expires === 'number' && Date.now() > data.expires) ? data.value : undefined;
  };
  return {
    keyv,
    readSession: async (sessionKey) => {
      const rows = (await adapter.query(readBoth, `${NAMESPACE}:${KEY_PREFIX.tokens}`, `${NAMESPACE}:${sessionKey}`)) as Array<{
        session: string;
        tokens: string | null;
      }>;
      return { session: await live(rows[0]?.session), tokens: await live(rows[0]?.tokens) };
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
