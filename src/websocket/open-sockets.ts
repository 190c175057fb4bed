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

/** SPEC §10: a socket whose session has ended is closed with 1008 (policy violation) and a reason. */
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
}

/**
 * The gateway's open WebSockets (README "WebSockets and server-sent
 * events"). Every SWEEP_MS each socket's session is looked up again: a
 * logout, a logout everywhere, a back-channel logout or a rejected refresh
 * deletes it from the store (on another replica too: with Redis the
 * invalidation channel drops this replica's cached copy), and `ttl` ends it,
 * so the socket is closed with 1008 within seconds. One access-log line per
 * closed socket.
 */
export class OpenSockets {
  readonly #open = new Set<OpenSocket>();
  readonly #store: SessionStore;
  readonly #clock: Clock;
  readonly #gauge: Gauge;
  readonly #log: Logger;
  readonly #sweep: NodeJS.Timeout;
  #closing: Promise<void> | undefined;

  constructor(store: SessionStore, clock: Clock, gauge: Gauge, log: Logger) {
    this.#store = store;
    this.#clock = clock;
    this.#gauge = gauge;
    this.#log = log;
    this.#sweep = setInterval(() => void this.#closeEnded(), SWEEP_MS);
    this.#sweep.unref();
  }

  get size(): number {
    return this.#open.size;
  }

  add(fields: Omit<OpenSocket, 'bytesIn' | 'bytesOut'>): OpenSocket {
    const socket: OpenSocket = { ...fields, bytesIn: 0, bytesOut: 0 };
    this.#open.add(socket);
    this.#gauge.inc();
    socket.browser.once('close', (code) => {
      this.#open.delete(socket);
      this.#gauge.dec();
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
      const close = () => {
        const closed = [...this.#open].map((socket) => this.#close(socket, GOING_AWAY, 'gateway shutting down'));
        void Promise.all(closed).then(() => resolve());
      };
      if (afterMs === 0 || this.#open.size === 0) close();
      else setTimeout(close, afterMs).unref();
    });
    return this.#closing;
  }

  async #closeEnded(): Promise<void> {
    const now = this.#clock.now();
    for (const socket of this.#open) {
      if (socket.hash === undefined || socket.browser.readyState !== WebSocket.OPEN) continue;
      try {
        if (!(await this.#stillSignedIn(socket, now))) void this.#close(socket, SESSION_ENDED, 'session ended');
      } catch (err) {
        // The store is unreachable: the socket stays open until it can tell.
        this.#log.warn({ err }, 'could not check a websocket session');
      }
    }
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
