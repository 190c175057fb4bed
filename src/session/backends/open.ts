import type { Backend } from './backend.js';
import type { RedisLockOptions } from './redis.js';
import { isRedisUrl } from '../../config/store-url.js';
import { NAMESPACE } from '../keys.js';

/**
 * Opens the backend named by `session.store`: `memory://`,
 * `sqlite://PATH` (relative to `cwd`; `sqlite:///abs` is absolute), or
 * `redis://` / `rediss://` (or Sentinel, Cluster: src/config/store-url.ts) shared by several replicas, its keys and channel
 * under `redisPrefix` so that several gateways can share one Redis. Only the
 * chosen backend's client is loaded: a gateway on SQLite never holds the
 * Redis client in memory, nor one on Redis the SQLite driver (BENCHMARKS.md "Memory").
 */
export async function openBackend(url: string, cwd: string, redisPrefix = NAMESPACE, lockOptions: RedisLockOptions = {}): Promise<Backend> {
  if (url.startsWith('memory:')) return (await import('./memory.js')).openMemory();
  if (url.startsWith('sqlite:')) {
    const { openSqlite, sqlitePath } = await import('./sqlite.js');
    return openSqlite(sqlitePath(url, cwd));
  }
  if (isRedisUrl(url)) return (await import('./redis.js')).openRedis(url, redisPrefix, lockOptions);
  throw new Error(`session.store: ${url.split(':')[0]} stores are not supported by this build`);
}
