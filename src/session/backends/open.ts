import type { Backend } from './backend.js';
import { openMemory } from './memory.js';
import { openRedis, type RedisLockOptions } from './redis.js';
import { isRedisUrl } from './redis-url.js';
import { openSqlite, sqlitePath } from './sqlite.js';
import { NAMESPACE } from '../keys.js';

/**
 * Opens the backend named by `session.store`: `memory://`,
 * `sqlite://PATH` (relative to `cwd`; `sqlite:///abs` is absolute), or
 * `redis://` / `rediss://` (or Sentinel, Cluster: ./redis-url.ts) shared by several replicas, its keys and channel
 * under `redisPrefix` so that several gateways can share one Redis.
 */
export async function openBackend(url: string, cwd: string, redisPrefix = NAMESPACE, lockOptions: RedisLockOptions = {}): Promise<Backend> {
  if (url.startsWith('memory:')) return openMemory();
  if (url.startsWith('sqlite:')) return openSqlite(sqlitePath(url, cwd));
  if (isRedisUrl(url)) return openRedis(url, redisPrefix, lockOptions);
  throw new Error(`session.store: ${url.split(':')[0]} stores are not supported by this build`);
}
