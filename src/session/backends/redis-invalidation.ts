import { randomUUID } from 'node:crypto';
import type { RedisClientType } from '@redis/client';
import type { CacheInvalidation } from './backend.js';

/** How often the epoch key is compared, to notice a Redis that lost its data (FLUSHALL, restart without persistence). */
const EPOCH_CHECK_MS = 1000;

/** What the invalidation needs of the subscribing connection (a node-redis client, Sentinel or Cluster). */
export interface Subscriber {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  /** Cluster clients have no isReady; isOpen stands in. */
  readonly isReady?: boolean;
  readonly isOpen: boolean;
  destroy(): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}
/** Separates the sender's id from the key in a message; neither contains a space. */
const SEPARATOR = ' ';

/**
 * Cross-replica cache invalidation over Redis pub/sub. Every write or delete
 * publishes `<replica id> <store key>` on one channel (in the same MULTI as
 * the write, see redis.ts); a second connection subscribed to that
 * channel makes every other replica drop the key from its cache.
 *
 * Pub/sub is fire-and-forget, so whenever messages may have been missed the
 * cache is distrusted: while the subscriber is disconnected `live` is false
 * (the store bypasses its cache), and the subscription only counts as live
 * again once a probe published by this replica has come back through it, at
 * which point the whole cache is cleared. A periodic read of an epoch key
 * also clears it after Redis lost its data without the connection dropping.
 */
export class RedisInvalidation implements CacheInvalidation {
  readonly #client: RedisClientType;
  readonly #subscriber: Subscriber;
  readonly #channel: string;
  readonly #epochKey: string;
  readonly #origin = randomUUID();
  readonly #receivers: Array<(key?: string) => void> = [];
  readonly #timer: NodeJS.Timeout;
  #subscribed = false;
  /** A probe was published at the last tick and has not come back yet. */
  #heartbeatPending = false;
  #epoch: string | undefined;

  /**
   * @param client the connection that writes (and publishes)
   * @param namespace prefix of the channel and epoch key names
   */
  /**
   * `subscriber` is the connection that subscribes: by default a duplicate of
   * `client`; a Sentinel or Cluster client passes one of its own kind, which
   * follows failovers and slot moves by itself.
   */
  constructor(client: RedisClientType, namespace: string, subscriber: Subscriber = client.duplicate()) {
    this.#client = client;
    this.#channel = `${namespace}:invalidate`;
    this.#epochKey = `${namespace}:epoch`;
    this.#subscriber = subscriber;
    // Errors surface through the store's own calls; an unhandled 'error' event would kill the process.
    this.#subscriber.on('error', () => this.#lost());
    this.#subscriber.on('end', () => this.#lost());
    this.#subscriber.on('reconnecting', () => this.#lost());
    this.#subscriber.on('ready', () => void this.#probe());
    // Sentinel: the master changed, and messages published meanwhile may be lost.
    this.#subscriber.on('topology-change', () => this.#lost());
    this.#timer = setInterval(() => void this.#tick(), EPOCH_CHECK_MS).unref();
  }

  get live(): boolean {
    return this.#subscribed && (this.#subscriber.isReady ?? this.#subscriber.isOpen);
  }

  listen(receiver: (key?: string) => void): void {
    this.#receivers.push(receiver);
  }

  /** Channel every replica listens on. */
  get channel(): string {
    return this.#channel;
  }

  /** The message announcing that `key` changed, tagged so its sender ignores it. */
  message(key: string): string {
    return `${this.#origin}${SEPARATOR}${key}`;
  }

  /** Connects the subscriber (retrying in the background when Redis is down) and waits at most `waitMs` for it. */
  async start(waitMs: number): Promise<void> {
    const subscribed = this.#subscriber
      .connect()
      .then(() => this.#subscriber.subscribe(this.#channel, (message) => this.#receive(message)))
      .then(() => this.#probe())
      .catch(() => undefined);
    await Promise.race([subscribed, new Promise((resolve) => setTimeout(resolve, waitMs).unref())]);
    await this.#tick();
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#subscribed = false;
    if (this.#subscriber.isOpen) this.#subscriber.destroy();
  }

  #receive(message: string): void {
    const split = message.indexOf(SEPARATOR);
    if (split < 0) return;
    const key = message.slice(split + 1);
    if (message.slice(0, split) !== this.#origin) {
      if (key !== '') this.#notify(key);
      return;
    }
    // Our own probe came back: from here on no message is missed, so whatever was cached before may be stale.
    if (key === '') this.#heartbeatPending = false;
    if (key === '' && !this.#subscribed) {
      this.#subscribed = true;
      this.#notify();
    }
  }

  /** Publishes an empty-key probe through the writing connection; `#receive` completes the (re)subscription. */
  async #probe(): Promise<void> {
    if (this.#subscribed || !(this.#subscriber.isReady ?? this.#subscriber.isOpen)) return;
    await this.#client.publish(this.#channel, this.message('')).catch(() => undefined);
  }

  #lost(): void {
    this.#subscribed = false;
    this.#heartbeatPending = false;
  }

  /**
   * A subscription can be lost without an event on the connection (a
   * Sentinel or Cluster client moving it to another node): a probe of our
   * own goes out every tick, and one still missing at the next tick counts
   * as a lost subscription (cache bypassed until a probe comes back).
   */
  async #heartbeat(): Promise<void> {
    if (this.#heartbeatPending) {
      this.#lost();
      await this.#probe();
      return;
    }
    this.#heartbeatPending = true;
    await this.#client.publish(this.#channel, this.message('')).catch(() => undefined);
  }

  /** Re-sends a lost probe, and clears the cache when the epoch key vanished or changed (Redis lost its data). */
  async #tick(): Promise<void> {
    if (!this.#subscribed) await this.#probe();
    else await this.#heartbeat();
    try {
      let epoch = (await this.#client.get(this.#epochKey)) ?? undefined;
      if (epoch === undefined) {
        const fresh = randomUUID();
        const set = await this.#client.set(this.#epochKey, fresh, { condition: 'NX' });
        epoch = set === null ? ((await this.#client.get(this.#epochKey)) ?? undefined) : fresh;
      }
      if (this.#epoch !== undefined && epoch !== this.#epoch) this.#notify();
      this.#epoch = epoch;
    } catch {
      // Redis is down: the store notices on its own calls, and the subscriber's reconnection clears the cache.
    }
  }

  #notify(key?: string): void {
    for (const receiver of this.#receivers) receiver(key);
  }
}
