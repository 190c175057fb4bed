import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import type { Provider } from './provider.js';
import { classifyProviderFailure, describeFailure } from './provider.js';
import { needsRefresh, readTokenResponse } from './token-set.js';
import { refreshedIdentity, SubjectMismatchError, type RefreshedIdentity } from './identify.js';
import type { SessionStore, TokenRecord } from '../session/store.js';
import { userLock } from '../session/keys.js';
import { endSessionsOf } from '../session/ending.js';
import { gatehouseError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Span } from '@opentelemetry/api';
import { activeSpan, annotate, traceAsCall } from '../tracing/tracing.js';
import type { ProviderRegistry } from './providers.js';
import { SIGN_IN_TARGET } from '../config/token-targets.js';

/** What a refresh ends in: done, failed, or joined to one already under way. */
export type RefreshResult = 'ok' | 'failed' | 'joined';

/** Counts refreshes by target (README "A token for each API") and result; a prom-client Counter is one. */
export interface RefreshCounter {
  inc(labels: { target: string; result: RefreshResult }): void;
}

export interface RefresherOptions {
  /** Each record is refreshed at the provider it was made with (its `provider`), with that provider's DPoP keys (RFC 9449 §5). */
  providers: ProviderRegistry;
  store: SessionStore;
  /** Where refresh outcomes are counted (the `gatehouse_token_refreshes_total` counter of src/metrics/metrics.ts). */
  metrics: { refreshes: RefreshCounter };
  refreshSkewMs: number;
  clock: Clock;
  defaultLifetime: number;
}

/** Delays between attempts to write a refreshed record the store did not take (then the next refresh tries again). */
const REWRITE_DELAYS_MS = [250, 500, 1000, 2000, 4000, 8000, 15_000, 30_000];

/** A refreshed record not yet in the store, and the refresh token it replaces. */
interface Unsaved {
  record: TokenRecord;
  replaced: string | undefined;
}

/**
 * Keeps access tokens fresh with one refresh per user at a time: the first
 * request that finds the token stale refreshes; concurrent ones await the
 * same promise. Under the user's lock it re-reads the record and re-checks
 * before calling the AS, so a refresh that just finished is reused, never
 * repeated: with refresh-token rotation a second use of the old refresh
 * token could revoke the whole grant (RFC 9700 §4.14.2).
 */
export class TokenRefresher {
  readonly #options: RefresherOptions;
  readonly #inFlight = new Map<string, Promise<TokenRecord>>();
  /**
   * userId -> tokens the AS issued that the store has not taken yet (a write
   * timed out). With rotation the old refresh token is dead once the AS
   * answered: dropping the new one would log the user out at the next
   * refresh, or revoke the grant (RFC 9700 §4.14.2).
   */
  readonly #unsaved = new Map<string, Unsaved>();

  constructor(options: RefresherOptions) {
    this.#options = options;
  }

  /**
   * The record itself when its access token is fresh; otherwise the refreshed
   * record. Throws GH_ERR_SESSION_REQUIRED when the grant is dead (every
   * session of the user is ended) and GH_ERR_PROVIDER_UNAVAILABLE when the AS
   * cannot answer (everything kept).
   */
  async fresh(record: TokenRecord, log: FastifyBaseLogger, now = this.#options.clock.now()): Promise<TokenRecord> {
    if (this.isFresh(record, now)) return record;
    return this.#singleFlight(record.userId, log);
  }

  /** Whether the record's access token may be used as it is at `now` (outside `tokens.refreshSkew`). */
  isFresh(record: TokenRecord, now: number): boolean {
    return !needsRefresh(record, this.#options.refreshSkewMs, now);
  }

  /**
   * A new access token for a user whose current one, `rejected`, the
   * upstream refused with 401 although it looked fresh (revoked at the AS,
   * say). Single-flight like {@link fresh}; when the stored token is no
   * longer `rejected` (another request replaced it meanwhile, on any
   * replica), that one is returned without calling the AS. Throws as fresh() does.
   */
  async replace(userId: string, rejected: string, log: FastifyBaseLogger): Promise<TokenRecord> {
    return this.#singleFlight(userId, log, rejected);
  }

  /** Joins the refresh of `userId` under way in this process, or starts one. */
  #singleFlight(userId: string, log: FastifyBaseLogger, rejected?: string): Promise<TokenRecord> {
    // The request's server span, which gets the refresh outcome (undefined while tracing is off).
    const span = activeSpan();
    const running = this.#inFlight.get(userId);
    if (running) {
      this.#options.metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'joined' });
      annotate(span, { 'gatehouse.refresh.outcome': 'joined' });
      return running;
    }
    const refresh = this.#refreshUnderLock(userId, log, rejected, span).finally(() => this.#inFlight.delete(userId));
    this.#inFlight.set(userId, refresh);
    return refresh;
  }

  async #refreshUnderLock(userId: string, log: FastifyBaseLogger, rejected: string | undefined, span: Span | undefined): Promise<TokenRecord> {
    return this.underLock(userId, async (current) => {
      const stale = rejected === undefined ? needsRefresh(current, this.#options.refreshSkewMs, this.#options.clock.now()) : current.accessToken === rejected;
      if (!stale) {
        this.#options.metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'joined' });
        annotate(span, { 'gatehouse.refresh.outcome': 'joined' });
        return current;
      }
      return this.#refreshOrEnd(current, log, span);
    });
  }

  /**
   * Runs `work` holding the user's lock (in this process and, on a shared
   * store, across replicas) on the user's current record: the stored one, or
   * tokens issued earlier that the store has not taken yet. Every grant that
   * presents the user's refresh token runs in here, one at a time, so with
   * rotation none ever presents a refresh token an earlier grant replaced
   * (RFC 9700 §4.14.2; README "A token for each API").
   * @throws GH_ERR_SESSION_REQUIRED when the user has no record any more.
   */
  async underLock<T>(userId: string, work: (current: TokenRecord) => Promise<T>): Promise<T> {
    return this.#options.store.withLock(userLock(userId), async () => {
      const current = await this.#current(userId);
      if (!current) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      return work(current);
    });
  }

  /**
   * Inside {@link underLock}: `current` itself when its access token is
   * fresh, else the refreshed record (stored). Throws as fresh() does.
   */
  async freshUnderLock(current: TokenRecord, log: FastifyBaseLogger): Promise<TokenRecord> {
    if (this.isFresh(current, this.#options.clock.now())) return current;
    return this.#refreshOrEnd(current, log, activeSpan());
  }

  /**
   * Inside {@link underLock}: writes a record for which the AS has just
   * issued tokens, `replaced` being the refresh token it held before. A
   * write the store does not take is kept in this process and retried.
   */
  async persistUnderLock(record: TokenRecord, replaced: string | undefined, log: FastifyBaseLogger): Promise<void> {
    await this.#persist(record, replaced, log);
  }

  /** Refreshes `current`, or ends every session of the user when it cannot be refreshed (no refresh token). */
  async #refreshOrEnd(current: TokenRecord, log: FastifyBaseLogger, span: Span | undefined): Promise<TokenRecord> {
    if (current.refreshToken === undefined) {
      annotate(span, { 'gatehouse.refresh.outcome': 'no_refresh_token' });
      log.info({ userId: current.user ?? current.userId }, 'access token expired without a refresh token');
      await endSessionsOf(this.#options.store, current, everySession);
      throw gatehouseError('GH_ERR_SESSION_REQUIRED');
    }
    return this.#refresh(current, log, span);
  }

  async #refresh(current: TokenRecord, log: FastifyBaseLogger, span: Span | undefined): Promise<TokenRecord> {
    const { store, metrics } = this.#options;
    const { provider, dpop, settings } = this.#options.providers.of(current);
    const sentAt = this.#options.clock.now();
    let response: Awaited<ReturnType<typeof oidc.refreshTokenGrant>>;
    // A record from before `dpop` was turned on has no key yet: it gets one now, bound to the refreshed token.
    const dpopKey = dpop ? (current.dpopKey ?? (await dpop.generate()).key) : undefined;
    let dpopHandle: oidc.DPoPHandle | undefined;
    try {
      dpopHandle = dpop && dpopKey ? await dpop.handle(dpopKey) : undefined;
      const options = dpopHandle ? { DPoP: dpopHandle } : undefined;
      // No `scope` parameter: the granted scope stays, and some servers reject a repeated one.
      response = await traceAsCall('refresh', () => oidc.refreshTokenGrant(provider.configuration, current.refreshToken!, undefined, options));
    } catch (err) {
      metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'failed' });
      const rejected = classifyProviderFailure(err) === 'rejected';
      annotate(span, { 'gatehouse.refresh.outcome': rejected ? 'rejected' : 'failed' });
      if (rejected) {
        log.info({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh rejected');
        await endSessionsOf(store, current, everySession);
        throw gatehouseError('GH_ERR_SESSION_REQUIRED', { cause: err });
      }
      log.warn({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh failed');
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    let issued;
    try {
      issued = readTokenResponse(response, sentAt, this.#options.defaultLifetime, dpop ? 'dpop' : 'bearer');
    } catch (err) {
      metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'failed' });
      annotate(span, { 'gatehouse.refresh.outcome': 'failed' });
      log.warn({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh response unusable');
      // The AS answered, so with rotation the old refresh token is spent: keep the new one (the
      // access token stays stale and the next request refreshes again) (test/refresh/issued-tokens-kept.test.ts).
      if (typeof response.refresh_token === 'string' && response.refresh_token !== current.refreshToken) {
        await this.#persist({ ...current, refreshToken: response.refresh_token }, current.refreshToken, log);
      }
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    let identity: RefreshedIdentity;
    try {
      identity = await refreshedIdentity(provider, response, current, settings.userIdClaim, dpopHandle);
    } catch (err) {
      metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'failed' });
      const otherUser = err instanceof SubjectMismatchError;
      annotate(span, { 'gatehouse.refresh.outcome': otherUser ? 'rejected' : 'failed' });
      const failure = describeFailure(err, userinfoEndpoint(provider));
      if (otherUser) {
        // The AS answers for someone else: nothing of this grant may be used any more.
        log.warn({ userId: current.user ?? current.userId, failure }, 'refresh names another user');
        await endSessionsOf(store, current, everySession);
        throw gatehouseError('GH_ERR_SESSION_REQUIRED', { cause: err });
      }
      // Claims that could not be read are not guessed: the new access token is not used (the request gets 503, the
      // next one refreshes again), but a rotated refresh token is kept, as for an unusable response above.
      log.warn({ userId: current.user ?? current.userId, failure }, 'userinfo after refresh failed');
      if (typeof response.refresh_token === 'string' && response.refresh_token !== current.refreshToken) {
        await this.#persist({ ...current, refreshToken: response.refresh_token }, current.refreshToken, log);
      }
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    const refreshed: TokenRecord = {
      ...current,
      ...(identity.user === undefined ? {} : { user: identity.user }),
      accessToken: issued.accessToken,
      refreshToken: issued.refreshToken ?? current.refreshToken,
      idToken: issued.idToken ?? current.idToken,
      expiresAt: issued.expiresAt,
      lifetime: issued.lifetime,
      claims: identity.claims,
      ...(dpopKey ? { dpopKey } : {}),
    };
    await this.#persist(refreshed, current.refreshToken, log);
    metrics.refreshes.inc({ target: SIGN_IN_TARGET, result: 'ok' });
    annotate(span, { 'gatehouse.refresh.outcome': 'ok' });
    log.info({ userId: current.user ?? current.userId, rotated: issued.refreshToken !== undefined }, 'token refreshed');
    return refreshed;
  }

  /**
   * The user's record, with the lock held: the stored one, or tokens issued
   * earlier that the store did not take, written now. These are dropped
   * when the stored record moved on without them: deleted (logout), or
   * holding a refresh token other than the one they replaced (a new login).
   */
  async #current(userId: string): Promise<TokenRecord | null> {
    const { store } = this.#options;
    const stored = await store.getTokens(userId, true);
    const unsaved = this.#unsaved.get(userId);
    if (!unsaved) return stored;
    if (!stored || stored.refreshToken !== unsaved.replaced) {
      this.#unsaved.delete(userId);
      return stored;
    }
    await store.saveTokens(unsaved.record);
    if (this.#unsaved.get(userId) === unsaved) this.#unsaved.delete(userId);
    return unsaved.record;
  }

  /**
   * Writes a record the AS has just issued tokens for. When the store does
   * not take it (a write timing out), the tokens are kept in this process
   * and the write is retried in the background, with the lock, until it
   * lands or the record moves on; the request goes on with the new tokens.
   */
  async #persist(record: TokenRecord, replaced: string | undefined, log: FastifyBaseLogger): Promise<void> {
    try {
      await this.#options.store.saveTokens(record);
      this.#unsaved.delete(record.userId);
    } catch (err) {
      log.warn({ userId: record.user ?? record.userId, failure: describeFailure(err) }, 'refreshed tokens not stored yet: retrying');
      const unsaved = { record, replaced };
      this.#unsaved.set(record.userId, unsaved);
      this.#rewriteLater(record.userId, unsaved, 0, log);
    }
  }

  #rewriteLater(userId: string, unsaved: Unsaved, attempt: number, log: FastifyBaseLogger): void {
    const delay = REWRITE_DELAYS_MS[attempt];
    if (delay === undefined) return;
    setTimeout(() => {
      if (this.#unsaved.get(userId) !== unsaved) return;
      this.#options.store.withLock(userLock(userId), () => this.#current(userId)).then(
        () => log.info({ userId: unsaved.record.user ?? userId }, 'refreshed tokens stored'),
        () => this.#rewriteLater(userId, unsaved, attempt + 1, log),
      );
    }, delay).unref();
  }
}


/** A rejected refresh (or a token that can no longer be refreshed) ends every session that shares the record. */
export function everySession(): boolean {
  return true;
}

function userinfoEndpoint(provider: Provider): string | undefined {
  return provider.ready ? provider.configuration.serverMetadata().userinfo_endpoint : undefined;
}

function tokenEndpoint(provider: Provider): string | undefined {
  return provider.ready ? provider.configuration.serverMetadata().token_endpoint : undefined;
}
