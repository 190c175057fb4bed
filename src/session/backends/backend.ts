import { mkdirSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import Keyv from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
import type { CacheInvalidation } from './redis-invalidation.js';
import { openRedis } from './redis.js';

/** Prefix of every key gatehouse writes, so a store can be shared with other data. */
export const NAMESPACE = 'gatehouse';

/** A keyv instance plus what only some backends can do. */
export interface Backend {
  keyv: Keyv;
  /** Whether several replicas may share this backend. */
  shared: boolean;
  /** Store-wide count of live keys starting with `prefix`, where the backend can count. */
  count?: (prefix: string) => Promise<number>;
  /** Deletes expired entries that were never read again. */
  sweep?: () => Promise<void>;
  /** Atomically records `key` for `ttlMs`; true the first time only, whichever replica asks. */
  claimOnce?: (key: string, ttlMs: number) => Promise<boolean>;
  /** Takes the lock `name` shared by every replica, waiting for it; resolves to its release. */
  lock?: (name: string) => Promise<() => Promise<void>>;
  /** Tells the in-process cache what other replicas changed. */
  invalidation?: CacheInvalidation;
  /** Releases what `keyv.disconnect()` does not (other connections, timers). */
  close?: () => Promise<void>;
}

/**
 * Opens the backend named by `session.store`: `memory://`,
 * `sqlite://PATH` (relative to `cwd`; `sqlite:///abs` is absolute), or
 * `redis://` / `rediss://` shared by several replicas, its keys and channel
 * under `redisPrefix` so that several gateways can share one Redis.
 */
export async function openBackend(url: string, cwd: string, redisPrefix = NAMESPACE): Promise<Backend> {
  if (url.startsWith('memory:')) return openMemory();
  if (url.startsWith('sqlite:')) return openSqlite(sqlitePath(url, cwd));
  if (url.startsWith('redis:') || url.startsWith('rediss:')) return openRedis(url, redisPrefix);
  throw new Error(`session.store: ${url.split(':')[0]} stores are not supported by this build`);
}

function openMemory(): Backend {
  const map = new Map<string, unknown>();
  const keyv = new Keyv({ store: map, namespace: NAMESPACE, throwOnErrors: true });
  return {
    keyv,
    shared: false,
    count: async (prefix) => {
      const now = Date.now();
      let live = 0;
      for (const [key, raw] of map) {
        if (!key.startsWith(`${NAMESPACE}:${prefix}`)) continue;
        const expires = (JSON.parse(raw as string) as { expires?: number | null }).expires;
        if (!expires || expires > now) live += 1;
      }
      return live;
    },
  };
}

/** Resolves `sqlite://./data/x.sqlite` against cwd; `sqlite:///abs/x.sqlite` is absolute. */
export function sqlitePath(url: string, cwd: string): string {
  const path = decodeURIComponent(url.slice('sqlite://'.length));
  return isAbsolute(path) ? path : resolve(cwd, path);
}

async function openSqlite(path: string): Promise<Backend> {
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
