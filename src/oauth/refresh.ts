import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import type { Provider } from './provider.js';
import { classifyProviderFailure, describeFailure } from './provider.js';
import { needsRefresh, readTokenResponse } from './token-set.js';
import type { SessionStore, TokenRecord } from '../session/store.js';
import { userLock } from '../session/keys.js';
import type { Metrics } from '../metrics/metrics.js';
import { gatehouseError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Span } from '@opentelemetry/api';
import { activeSpan, annotate, traceAsCall } from '../tracing/tracing.js';

export interface RefresherOptions {
  provider: Provider;
  store: SessionStore;
  metrics: Metrics;
  refreshSkewMs: number;
  clock: Clock;
  defaultLifetime: number;
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
    if (!needsRefresh(record, this.#options.refreshSkewMs, now)) return record;
    return this.#singleFlight(record.userId, log);
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
      this.#options.metrics.refreshes.inc({ result: 'joined' });
      annotate(span, { 'gatehouse.refresh.outcome': 'joined' });
      return running;
    }
    const refresh = this.#refreshUnderLock(userId, log, rejected, span).finally(() => this.#inFlight.delete(userId));
    this.#inFlight.set(userId, refresh);
    return refresh;
  }

  async #refreshUnderLock(userId: string, log: FastifyBaseLogger, rejected: string | undefined, span: Span | undefined): Promise<TokenRecord> {
    const { store, metrics } = this.#options;
    return store.withLock(userLock(userId), async () => {
      const current = await store.getTokens(userId, true);
      if (!current) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      const stale = rejected === undefined ? needsRefresh(current, this.#options.refreshSkewMs, this.#options.clock.now()) : current.accessToken === rejected;
      if (!stale) {
        metrics.refreshes.inc({ result: 'joined' });
        annotate(span, { 'gatehouse.refresh.outcome': 'joined' });
        return current;
      }
      if (current.refreshToken === undefined) {
        annotate(span, { 'gatehouse.refresh.outcome': 'no_refresh_token' });
        log.info({ userId: current.user ?? userId }, 'access token expired without a refresh token');
        await endAllSessions(store, current);
        throw gatehouseError('GH_ERR_SESSION_REQUIRED');
      }
      return this.#refresh(current, log, span);
    });
  }

  async #refresh(current: TokenRecord, log: FastifyBaseLogger, span: Span | undefined): Promise<TokenRecord> {
    const { provider, store, metrics } = this.#options;
    const sentAt = this.#options.clock.now();
    let response: Awaited<ReturnType<typeof oidc.refreshTokenGrant>>;
    try {
      // No `scope` parameter: the granted scope stays, and some servers reject a repeated one.
      response = await traceAsCall('refresh', () => oidc.refreshTokenGrant(provider.configuration, current.refreshToken!));
    } catch (err) {
      metrics.refreshes.inc({ result: 'failed' });
      const rejected = classifyProviderFailure(err) === 'rejected';
      annotate(span, { 'gatehouse.refresh.outcome': rejected ? 'rejected' : 'failed' });
      if (rejected) {
        log.info({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh rejected');
        await endAllSessions(store, current);
        throw gatehouseError('GH_ERR_SESSION_REQUIRED', { cause: err });
      }
      log.warn({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh failed');
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    let issued;
    try {
      issued = readTokenResponse(response, sentAt, this.#options.defaultLifetime);
    } catch (err) {
      metrics.refreshes.inc({ result: 'failed' });
      annotate(span, { 'gatehouse.refresh.outcome': 'failed' });
      log.warn({ userId: current.user ?? current.userId, failure: describeFailure(err, tokenEndpoint(provider)) }, 'refresh response unusable');
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    const claims = provider.isOpenIdProvider && issued.idToken ? { ...(response.claims() ?? {}) } : current.claims;
    const refreshed: TokenRecord = {
      ...current,
      accessToken: issued.accessToken,
      refreshToken: issued.refreshToken ?? current.refreshToken,
      idToken: issued.idToken ?? current.idToken,
      expiresAt: issued.expiresAt,
      lifetime: issued.lifetime,
      claims,
    };
    await store.saveTokens(refreshed);
    metrics.refreshes.inc({ result: 'ok' });
    annotate(span, { 'gatehouse.refresh.outcome': 'ok' });
    log.info({ userId: current.user ?? current.userId, rotated: issued.refreshToken !== undefined }, 'token refreshed');
    return refreshed;
  }
}

/** Deletes the user's token record and every session that shares it (README "What the browser sees", rejected refresh). */
export async function endAllSessions(store: SessionStore, record: TokenRecord): Promise<void> {
  await Promise.all(Object.keys(record.sessions).map((hash) => store.deleteSession(hash)));
  await store.deleteTokens(record.userId);
}

function tokenEndpoint(provider: Provider): string | undefined {
  return provider.ready ? provider.configuration.serverMetadata().token_endpoint : undefined;
}
