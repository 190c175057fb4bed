import WebSocket from 'ws';
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import type { Clock } from '../clock.js';
import type { SessionStore } from '../session/store.js';
import type { Route } from '../routing/route-table.js';
import type { RelayCounters } from './relay.js';

/** How often open sockets are checked against their sessions: a socket closes within this (plus a store read) of its session ending. */
const SWEEP_MS = 2000;
/** How long a peer gets to answer a close frame before its socket is cut. */
const CLOSE_WAIT_MS = 1000;
/** How many sockets' sessions one sweep reads from the store at once. */
const SWEEP_CONCURRENCY = 16;

/** README "WebSockets and server-sent events": a socket whose session has ended is closed with 1008 (policy violation) and a reason. */
const SESSION_ENDED = 1008;
const GOING_AWAY = 1001;

/** One proxied WebSocket: both sides, and whose session keeps it open. */
export interface OpenSocket extends RelayCounters {
  browser: WebSocket;
  upstream: WebSocket;
  route: Route;
  /** Hash of the session id; undefined on a public route or an optional one without a session. */
  hash: string | undefined;
  /** The key of the user's token record. */
  userKey: string | undefined;
  /** The user as shown (the `userIdClaim` value), logged pseudonymously. */
  user: string | undefined;
  /** The session's absolute end (`session.ttl`), ms. */
  expiresAt: number | undefined;
  openedAt: number;
  /** Gives back the slot `take` gave this socket's user or address (called once, when the socket closes). */
  release: () => void;
}

/** When each side last answered a ping (or opened), ms of the system clock. */
interface Liveness {
  browser: number;
  upstream: number;
}

/**
 * The gateway's open WebSockets (README "WebSockets and server-sent
 * events"). Every SWEEP_MS each socket's session is looked up again: a
 * logout, a logout everywhere, a back-channel logout or a rejected refresh
 * deletes it from the store (on another replica too: with Redis the
 * invalidation channel drops this replica's cached copy), and `ttl` ends it,
 * so the socket is closed with 1008 within seconds; a sweep starts only once
 * the last one has finished, and reads at most SWEEP_CONCURRENCY sessions at
 * once. Each side is pinged every third of `server.idleTimeout`; a side that
 * answered no ping for `server.idleTimeout` (a peer gone without a FIN) gets
 * both sides cut. At most `limits.perUserConcurrency` sockets per user, or
 * per client address without a session, are open or opening (`take`). One
 * access-log line per closed socket.
 */
export class OpenSockets {
  readonly #open = new Set<OpenSocket>();
  readonly #store: SessionStore;
  readonly #clock: Clock;
  readonly #gauge: Gauge;
  readonly #log: Logger;
  readonly #sweep: NodeJS.Timeout;
  readonly #ping: NodeJS.Timeout | undefined;
  readonly #idleMs: number;
  readonly #liveness = new WeakMap<OpenSocket, Liveness>();
  /** Open or opening sockets per holder (`u:` user key, `a:` client address). */
  readonly #held = new Map<string, number>();
  #sweeping = false;
  #closing: Promise<void> | undefined;

  /** `idleTimeoutMs`: `server.idleTimeout`; 0 turns the pings off. */
  constructor(store: SessionStore, clock: Clock, gauge: Gauge, log: Logger, idleTimeoutMs = 0) {
    this.#store = store;
    this.#clock = clock;
    this.#gauge = gauge;
    this.#log = log;
    this.#idleMs = idleTimeoutMs;
    this.#sweep = setInterval(() => void this.#sweepOnce(), SWEEP_MS);
    this.#sweep.unref();
    if (idleTimeoutMs > 0) {
      this.#ping = setInterval(() => this.#pingAll(), Math.max(1, Math.floor(idleTimeoutMs / 3)));
      this.#ping.unref();
    }
  }

  /**
   * Takes one of `limit` slots of `holder` for a socket about to open (0: no
   * limit); false when they are all taken. The slot is given back by the
   * socket's `release`, or by `give` when the upgrade fails.
   */
  take(holder: string, limit: number): boolean {
    const held = this.#held.get(holder) ?? 0;
    if (limit > 0 && held >= limit) return false;
    this.#held.set(holder, held + 1);
    return true;
  }

  give(holder: string): void {
    const held = (this.#held.get(holder) ?? 1) - 1;
    if (held <= 0) this.#held.delete(holder);
    else this.#held.set(holder, held);
  }

  get size(): number {
    return this.#open.size;
  }

  add(fields: Omit<OpenSocket, 'bytesIn' | 'bytesOut'>): OpenSocket {
    const socket: OpenSocket = { ...fields, bytesIn: 0, bytesOut: 0 };
    this.#open.add(socket);
    this.#gauge.inc();
    const now = Date.now();
    const liveness: Liveness = { browser: now, upstream: now };
    this.#liveness.set(socket, liveness);
    socket.browser.on('pong', () => (liveness.browser = Date.now()));
    socket.upstream.on('pong', () => (liveness.upstream = Date.now()));
    socket.browser.once('close', (code) => {
      this.#open.delete(socket);
      this.#gauge.dec();
      socket.release();
      this.#log.info(
        {
          method: 'GET',
          path: socket.route.label,
          route: socket.route.label,
          websocket: true,
          durationMs: this.#clock.now() - socket.openedAt,
          bytesIn: socket.bytesIn,
          bytesOut: socket.bytesOut,
          closeCode: code,
          ...(socket.user === undefined ? {} : { userId: socket.user }),
        },
        'websocket closed',
      );
    });
    return socket;
  }

  /**
   * Closes every socket with 1001 after `afterMs` (SIGTERM: after
   * `server.shutdownGrace`); resolves once they are all closed. The first
   * call decides when: a later one (the gateway's close) returns the same promise.
   */
  closeAll(afterMs: number): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      clearInterval(this.#sweep);
      clearInterval(this.#ping);
      const close = () => {
        const closed = [...this.#open].map((socket) => this.#close(socket, GOING_AWAY, 'gateway shutting down'));
        void Promise.all(closed).then(() => resolve());
      };
      if (afterMs === 0 || this.#open.size === 0) close();
      else setTimeout(close, afterMs).unref();
    });
    return this.#closing;
  }

  /** Pings both sides of every socket; cuts one whose side answered none for `server.idleTimeout`. */
  #pingAll(): void {
    const now = Date.now();
    for (const socket of this.#open) {
      const liveness = this.#liveness.get(socket)!;
      const { browser, upstream } = socket;
      if (now - liveness.browser > this.#idleMs || now - liveness.upstream > this.#idleMs) {
        const side = now - liveness.browser > this.#idleMs ? 'browser' : 'upstream';
        this.#log.info({ route: socket.route.label, side, ...(socket.user === undefined ? {} : { userId: socket.user }) }, 'websocket peer answered no ping: cut');
        browser.terminate();
        upstream.terminate();
        continue;
      }
      if (browser.readyState === WebSocket.OPEN) browser.ping();
      if (upstream.readyState === WebSocket.OPEN) upstream.ping();
    }
  }

  /**
   * One sweep at a time: on a slow store, the next waits for this one
   * instead of piling up. A sweep that outlasts its interval is logged (the
   * store is slow: sockets of ended sessions close later than they should).
   */
  async #sweepOnce(): Promise<void> {
    if (this.#sweeping) return;
    this.#sweeping = true;
    const startedAt = Date.now();
    try {
      const sockets = await this.#closeEnded();
      const durationMs = Date.now() - startedAt;
      if (durationMs > SWEEP_MS) this.#log.warn({ startedAt, durationMs, sockets }, 'websocket session sweep took longer than its interval');
    } finally {
      this.#sweeping = false;
    }
  }

  /** Checks every open socket of a session; resolves with how many it checked. */
  async #closeEnded(): Promise<number> {
    const now = this.#clock.now();
    const queue = [...this.#open].filter((socket) => socket.hash !== undefined && socket.browser.readyState === WebSocket.OPEN);
    const worker = async () => {
      for (let socket = queue.pop(); socket !== undefined; socket = queue.pop()) {
        try {
          if (!(await this.#stillSignedIn(socket, now))) void this.#close(socket, SESSION_ENDED, 'session ended');
        } catch (err) {
          // The store is unreachable: the socket stays open until it can tell.
          this.#log.warn({ err }, 'could not check a websocket session');
        }
      }
    };
    const checked = queue.length;
    await Promise.all(Array.from({ length: Math.min(SWEEP_CONCURRENCY, queue.length) }, worker));
    return checked;
  }

  async #stillSignedIn(socket: OpenSocket, now: number): Promise<boolean> {
    if (socket.expiresAt !== undefined && now >= socket.expiresAt) return false;
    const session = await this.#store.getSession(socket.hash!, now);
    if (session === null) return false;
    const tokens = await this.#store.getTokens(socket.userKey!);
    return tokens !== null && tokens.sessions[socket.hash!] !== undefined;
  }

  #close(socket: OpenSocket, code: number, reason: string): Promise<void> {
    const { browser, upstream } = socket;
    if (browser.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      browser.once('close', () => resolve());
      browser.close(code, reason);
      upstream.close(code === SESSION_ENDED ? 1000 : GOING_AWAY, reason);
      setTimeout(() => {
        browser.terminate();
        upstream.terminate();
      }, CLOSE_WAIT_MS).unref();
    });
  }
}
