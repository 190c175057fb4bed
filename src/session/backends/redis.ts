import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Keyv from 'keyv';
import KeyvRedis, { createClient, createCluster, createSentinel } from '@keyv/redis';
import type { RedisClientType } from '@redis/client';
import { LockBusyError, LockLostError, lockFence, readSessionTwice, type Backend, type LockRelease } from './backend.js';
import { RedisInvalidation, type Subscriber } from './redis-invalidation.js';
import { KEY_PREFIX } from '../keys.js';
import { parseRedisUrl, storeEndpoint, type RedisTarget } from '../../config/store-url.js';
import { causeCode } from '../../failure.js';
import type { Logger } from 'pino';

/** A command that gets no answer within this long fails (a hung Redis must not hang requests). */
const COMMAND_TIMEOUT_MS = 2000;
const CONNECT_TIMEOUT_MS = 2000;
/** How long start-up waits for Redis before listening anyway (requests get 503 until it answers). */
const START_WAIT_MS = 2000;
/**
 * A lock outlives its holder's crash by at most this long. While its holder
 * runs, the lease is extended every third of it, however long the refresh
 * takes (`provider.timeout` is not bounded); writes under it are fenced by
 * its token, so a holder whose lease lapsed anyway (a paused process) cannot
 * overwrite a newer record (test/redis/lock-lease.test.ts).
 */
const LOCK_TTL_MS = 30_000;
/** A request gives up waiting for a lock after this long (503 GH_ERR_STORE_BUSY, the store stays up). */
const LOCK_WAIT_MS = 30_000;
/** Extends the lease only if the lock still holds our token. */
const EXTEND_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
/**
 * A write fenced by a lock: KEYS[1] the record, KEYS[2] the lock; ARGV the
 * token, the value ('' deletes), the PX ('' for none), the channel and the
 * invalidation message. Nothing happens unless the lock holds the token.
 */
const FENCED_WRITE_SCRIPT = `
if redis.call('get', KEYS[2]) ~= ARGV[1] then return -1 end
local changed
if ARGV[2] == '' then changed = redis.call('del', KEYS[1])
elseif ARGV[3] == '' then redis.call('set', KEYS[1], ARGV[2]); changed = 1
else redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]); changed = 1 end
redis.call('publish', ARGV[4], ARGV[5])
return changed`;
const LOCK_POLL_MAX_MS = 50;
/** One hit in a fixed window: KEYS[1] the counter, ARGV[1] the window in ms; returns the count and the ms left. */
const COUNT_HIT_SCRIPT = `
local count = redis.call('incr', KEYS[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then redis.call('pexpire', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;
/** Deletes the lock only if it still holds our token: an expired lock taken over by another replica is not ours to release. */
const RELEASE_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
/** Store keys of sessions start with this; they are also counted in the sessions ZSET. */
const SESSION_PREFIX = KEY_PREFIX.session;

/**
 * Reconnects after 50 ms, doubling up to 2 s, with jitter so that replicas do
 * not reconnect in lockstep; never gives up (README "Run several replicas (Redis)": reconnects by itself).
 */
export function reconnectDelay(retries: number): number {
  return Math.min(50 * 2 ** retries, 2000) + Math.floor(Math.random() * 50);
}

/**
 * The @keyv/redis adapter, with every write and delete sent in one MULTI with
 * its side effects: the invalidation message for the other replicas' caches
 * and, for sessions, the ZSET entry that lets every replica count them.
 */
class CoherentRedisAdapter extends KeyvRedis<string> {
  readonly #redis: RedisClientType;
  readonly #invalidation: RedisInvalidation;
  readonly #sessions: string;

  constructor(client: RedisClientType, invalidation: RedisInvalidation, sessionsKey: string) {
    super(client, { throwOnErrors: true, throwOnConnectError: true });
    this.#redis = client;
    this.#invalidation = invalidation;
    this.#sessions = sessionsKey;
  }

  override async set(key: string, value: string, ttl?: number): Promise<void> {
    // As in @keyv/redis, no ttl (or 0) means no expiry; one already past expires at once rather than failing the command.
    const px = ttl ? Math.max(1, Math.ceil(ttl)) : undefined;
    if (key.startsWith(KEY_PREFIX.tokens)) {
      const fence = lockFence.getStore();
      if (fence) return void (await this.#fenced(fence, key, value, px));
    }
    const expiration = px === undefined ? undefined : { expiration: { type: 'PX' as const, value: px } };
    // A session's last use is never cached: no other replica needs to hear of it.
    if (key.startsWith(KEY_PREFIX.seen)) return void (await this.#redis.set(this.createKeyPrefix(key, this.namespace), value, expiration));
    const multi = this.#redis.multi();
    multi.set(this.createKeyPrefix(key, this.namespace), value, expiration);
    if (key.startsWith(SESSION_PREFIX)) multi.zAdd(this.#sessions, { score: Date.now() + (px ?? Number.MAX_SAFE_INTEGER), value: key.slice(SESSION_PREFIX.length) });
    multi.publish(this.#invalidation.channel, this.#invalidation.message(key));
    await multi.exec();
  }

  override async delete(key: string): Promise<boolean> {
    if (key.startsWith(KEY_PREFIX.tokens)) {
      const fence = lockFence.getStore();
      if (fence) return (await this.#fenced(fence, key, '', undefined)) > 0;
    }
    const multi = this.#redis.multi();
    multi.del(this.createKeyPrefix(key, this.namespace));
    if (key.startsWith(SESSION_PREFIX)) multi.zRem(this.#sessions, key.slice(SESSION_PREFIX.length));
    multi.publish(this.#invalidation.channel, this.#invalidation.message(key));
    const [deleted] = await multi.exec();
    return Number(deleted) > 0;
  }

  /** A token-record write (or delete, value '') made under a lock: only while the lock holds our token. */
  async #fenced(fence: { key: string; token: string }, key: string, value: string, px: number | undefined): Promise<number> {
    const result = Number(
      await this.#redis.eval(FENCED_WRITE_SCRIPT, {
        keys: [this.createKeyPrefix(key, this.namespace), fence.key],
        arguments: [fence.token, value, px === undefined ? '' : String(px), this.#invalidation.channel, this.#invalidation.message(key)],
      }),
    );
    if (result < 0) throw new LockLostError('the lock lapsed and is held by another: the write was not made');
    return result;
  }
}

/** Lock timings, shorter in tests of the lease itself. */
export interface RedisLockOptions {
  lockTtlMs?: number;
  lockWaitMs?: number;
  /** Where a failing connection is reported (once per cause, not per reconnect attempt). */
  log?: Logger;
}

/**
 * The client for a store URL (src/config/store-url.ts): one server, a Sentinel-managed
 * master, or a Cluster; and the connection the invalidation subscribes on.
 * Sentinel and Cluster clients expose the same commands as a single
 * client (node-redis routes each to the master, or to the slot's master),
 * so the rest of this file uses them through the single client's type.
 * Sessions are never read from replicas: a replica may lag behind a write
 * (a logout, a refresh) that its master has acknowledged.
 */
function createClients(url: string, target: RedisTarget): { client: RedisClientType; subscriber?: Subscriber } {
  const socket = { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnectDelay, ...(target.tls ? { tls: true as const } : {}) };
  const node = {
    disableOfflineQueue: true,
    commandOptions: { timeout: COMMAND_TIMEOUT_MS },
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
  };
  if (target.mode === 'single') return { client: createClient({ url, ...node, socket }) };
  if (target.mode === 'sentinel') {
    // The credentials are the data nodes'; sentinels are asked without (a sentinel with requirepass is not supported yet).
    const sentinel = () =>
      createSentinel({
        name: target.master!,
        sentinelRootNodes: target.nodes,
        nodeClientOptions: { ...node, database: target.database, socket },
        sentinelClientOptions: { socket },
        masterPoolSize: 1,
        replicaPoolSize: 0,
      });
    return { client: sentinel() as unknown as RedisClientType, subscriber: sentinel() as unknown as Subscriber };
  }
  const cluster = createCluster({
    rootNodes: target.nodes.map(({ host, port }) => ({ socket: { host, port } })),
    defaults: { ...node, socket },
    useReplicas: false,
  });
  return { client: cluster as unknown as RedisClientType, subscriber: cluster.duplicate() as unknown as Subscriber };
}

/**
 * The key prefix. In a Cluster every key carries the hash tag `{namespace}`,
 * so all of them live in one slot: the MULTI that writes a session, its
 * ZSET entry and the invalidation, and the lock, each touch several keys,
 * which Redis Cluster allows only within one slot (README, "Redis Sentinel
 * and Cluster"). gatehouse's data set is small; the Cluster gives it
 * availability, not sharding.
 */
export function keyNamespace(target: RedisTarget, namespace: string): string {
  return target.mode === 'cluster' ? `{${namespace}}` : namespace;
}

/**
 * Opens a shared Redis backend: `redis://[[USER]:PASSWORD@]HOST:PORT/DB`,
 * `redis+sentinel://…`, `redis+cluster://…` (`rediss…` for TLS). Commands
 * fail at once while the connection is down (no offline queue) so requests
 * get 503 instead of hanging, and the client reconnects by itself. Keys are
 * `NAMESPACE:…` and expire with what they hold.
 */
export async function openRedis(url: string, prefix: string, options: RedisLockOptions = {}): Promise<Backend> {
  const lockTtlMs = options.lockTtlMs ?? LOCK_TTL_MS;
  const lockWaitMs = options.lockWaitMs ?? LOCK_WAIT_MS;
  const target = parseRedisUrl(url);
  const namespace = keyNamespace(target, prefix);
  const { client, subscriber } = createClients(url, target);
  // Failures reach the store through the rejected commands; without a listener an 'error' event would crash the process.
  // The connection's own failure (refused, a certificate not trusted, a bad password) is logged once per cause: the
  // commands only say "the client is offline", and an operator needs the why (README "Run several replicas (Redis)").
  let lastFailure: string | undefined;
  client.on('error', (err: unknown) => {
    const code = causeCode(err) ?? (err instanceof Error ? err.name : 'unknown');
    if (code === lastFailure) return;
    lastFailure = code;
    options.log?.warn({ failure: { code, endpoint: storeEndpoint(url) } }, 'store connection failed');
  });
  client.on('ready', () => (lastFailure = undefined));
  const sessionsKey = `${namespace}:sessions`;
  const invalidation = new RedisInvalidation(client, namespace, subscriber);
  const adapter = new CoherentRedisAdapter(client, invalidation, sessionsKey);
  adapter.keyPrefixSeparator = ':';
  const keyv = new Keyv({ store: adapter, namespace, useKeyPrefix: false, throwOnErrors: true });

  // connect() keeps retrying while Redis is down; start-up waits a little, then listens anyway.
  const connected = client.connect().then(
    () => undefined,
    () => undefined,
  );
  await Promise.all([Promise.race([connected, sleep(START_WAIT_MS, undefined, { ref: false })]), invalidation.start(START_WAIT_MS)]);

  const prefixed = (key: string) => `${namespace}:${key}`;
  return {
    keyv,
    readSession: readSessionTwice(keyv),
    shared: true,
    invalidation,
    count: async (prefix) => {
      if (prefix !== SESSION_PREFIX) throw new Error(`redis backend counts sessions only, not ${prefix}`);
      const [, live] = await client.multi().zRemRangeByScore(sessionsKey, '-inf', Date.now()).zCard(sessionsKey).exec();
      return Number(live);
    },
    sweep: async () => {
      await client.zRemRangeByScore(sessionsKey, '-inf', Date.now());
    },
    claimOnce: async (key, ttlMs) => {
      const set = await client.set(prefixed(key), '1', { condition: 'NX', expiration: { type: 'PX', value: Math.max(1, Math.ceil(ttlMs)) } });
      return set !== null;
    },
    countHit: async (key, windowMs) => {
      const [count, ttlMs] = (await client.eval(COUNT_HIT_SCRIPT, { keys: [prefixed(key)], arguments: [String(windowMs)] })) as [number, number];
      return { count: Number(count), ttlMs: Number(ttlMs) };
    },
    lock: async (name) => {
      const key = prefixed(`${KEY_PREFIX.lock}${name}`);
      const token = randomUUID();
      const deadline = Date.now() + lockWaitMs;
      let pause = 5;
      while ((await client.set(key, token, { condition: 'NX', expiration: { type: 'PX', value: lockTtlMs } })) === null) {
        if (Date.now() >= deadline) throw new LockBusyError(`lock still held after ${lockWaitMs} ms`);
        await sleep(pause);
        pause = Math.min(pause * 2, LOCK_POLL_MAX_MS);
      }
      // The lease is renewed while the holder runs; a renewal that finds the lock gone stops (the fence then refuses writes).
      const renewal = setInterval(() => {
        client.eval(EXTEND_SCRIPT, { keys: [key], arguments: [token, String(lockTtlMs)] }).then(
          (extended) => {
            if (Number(extended) === 0) clearInterval(renewal);
          },
          () => undefined,
        );
      }, Math.max(10, Math.floor(lockTtlMs / 3)));
      renewal.unref();
      const release: LockRelease = async () => {
        clearInterval(renewal);
        await client.eval(RELEASE_SCRIPT, { keys: [key], arguments: [token] });
      };
      release.fence = { key, token };
      return release;
    },
    close: async () => {
      await invalidation.close();
      if (client.isReady ?? client.isOpen) await client.close();
      else if (client.isOpen) client.destroy();
    },
  };
}
