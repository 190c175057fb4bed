import { mkdirSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import Keyv from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
import type { Backend } from './backend.js';
import { NAMESPACE } from '../keys.js';

/** Resolves `sqlite://./data/x.sqlite` against cwd; `sqlite:///abs/x.sqlite` is absolute. */
export function sqlitePath(url: string, cwd: string): string {
  const path = decodeURIComponent(url.slice('sqlite://'.length));
  return isAbsolute(path) ? path : resolve(cwd, path);
}

/** A backend in one SQLite file (`sqlite://PATH`), for a single replica. */
export async function openSqlite(path: string): Promise<Backend> {
  mkdirSync(dirname(path), { recursive: true });
  const adapter = new KeyvSqlite({ uri: `sqlite://${path}`, table: 'gatehouse', busyTimeout: 5000 });
  // WAL lets readers proceed during a write; NORMAL sync is durable across process crashes.
  await adapter.query('PRAGMA journal_mode=WAL');
  await adapter.query('PRAGMA synchronous=NORMAL');
  const keyv = new Keyv({ store: adapter, namespace: NAMESPACE, throwOnErrors: true });
  const expires = "json_extract(value, '$.expires')";
  return {
    keyv,
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
