import { randomUUID } from 'node:crypto';
import type { RedisClientType } from '@redis/client';
import type { CacheInvalidation } from './backend.js';

/** How often the epoch key is compared, to notice a Redis that lost its data (FLUSHALL, restart without persistence). */
const EPOCH_CHECK_MS = 1000;
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
  readonly #subscriber: RedisClientType;
  readonly #channel: string;
  readonly #epochKey: string;
  readonly #origin = randomUUID();
  readonly #receivers: Array<(key?: string) => void> = [];
  readonly #timer: NodeJS.Timeout;
  #subscribed = false;
  #epoch: string | undefined;

  /**
   * @param client the connection that writes (and publishes)
   * @param namespace prefix of the channel and epoch key names
   */
  constructor(client: RedisClientType, namespace: string) {
    this.#client = client;
    this.#channel = `${namespace}:invalidate`;
    this.#epochKey = `${namespace}:epoch`;
    this.#subscriber = client.duplicate();
    // Errors surface through the store's own calls; an unhandled 'error' event would kill the process.
    this.#subscriber.on('error', () => this.#lost());
    this.#subscriber.on('end', () => this.#lost());
    this.#subscriber.on('reconnecting', () => this.#lost());
    this.#subscriber.on('ready', () => void this.#probe());
    this.#timer = setInterval(() => void this.#tick(), EPOCH_CHECK_MS).unref();
  }

  get live(): boolean {
    return this.#subscribed && this.#subscriber.isReady;
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
    if (key === '' && !this.#subscribed) {
      this.#subscribed = true;
      this.#notify();
    }
  }

  /** Publishes an empty-key probe through the writing connection; `#receive` completes the (re)subscription. */
  async #probe(): Promise<void> {
    if (this.#subscribed || !this.#subscriber.isReady) return;
    await this.#client.publish(this.#channel, this.message('')).catch(() => undefined);
  }

  #lost(): void {
    this.#subscribed = false;
  }

  /** Re-sends a lost probe, and clears the cache when the epoch key vanished or changed (Redis lost its data). */
  async #tick(): Promise<void> {
    if (!this.#subscribed) await this.#probe();
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
