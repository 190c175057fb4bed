import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import { classifyProviderFailure, describeFailure } from './provider.js';
import { needsRefresh, readTokenResponse } from './token-set.js';
import { everySession, type TokenRefresher } from './refresh.js';
import type { ProviderRegistry } from './providers.js';
import type { SessionStore, TargetToken, TokenRecord } from '../session/store.js';
import { endSessionsOf } from '../session/ending.js';
import type { TokenTarget } from '../config/token-targets.js';
import { gatehouseError } from '../errors.js';
import type { Clock } from '../clock.js';
import { traceAsCall } from '../tracing/tracing.js';

/** RFC 8693 §2.1 and §3. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';

/**
 * OAuth errors that refuse one target without saying anything about the
 * user's grant (RFC 8707 §2, RFC 6749 §5.2, RFC 8693 §2.2.2): the request
 * gets 403 `token_refused`, the session and the other targets' tokens stay.
 */
const TARGET_REFUSALS: ReadonlySet<string> = new Set(['invalid_target', 'invalid_scope', 'access_denied', 'unauthorized_client']);

export interface TargetTokensOptions {
  /** Each record's grants go to the provider it was made with, with that provider's DPoP keys (RFC 9449 §5). */
  providers: ProviderRegistry;
  refresher: TokenRefresher;
  store: SessionStore;
  /** `gatehouse_token_refreshes_total`, by target label and result. */
  refreshes: { inc(labels: { target: string; result: string }): void };
  refreshSkewMs: number;
  clock: Clock;
  defaultLifetime: number;
}

/** A target's token and the user's record it was kept in. */
export interface TargetGrant {
  record: TokenRecord;
  token: TargetToken;
}

/**
 * The users' tokens for token targets (README "A token for each API"):
 * obtained on first use and whenever stale (the `tokens.refreshSkew` rule),
 * kept in the user's sealed token record beside the sign-in tokens. A
 * `refresh` target is asked for with the refresh token and `resource`/`scope`
 * (RFC 8707 §2.2), an `exchange` target by exchanging the sign-in access
 * token or ID token (RFC 8693). Concurrent requests of one user for one
 * target in this process share one grant; across replicas, every grant runs
 * under the user's lock after re-reading the record (the order of
 * src/oauth/refresh.ts), so a grant another replica just finished is used,
 * not repeated, and with refresh-token rotation each grant presents the
 * newest refresh token.
 */
export class TargetTokens {
  readonly #options: TargetTokensOptions;
  readonly #inFlight = new Map<string, Promise<TargetGrant>>();

  constructor(options: TargetTokensOptions) {
    this.#options = options;
  }

  /** The record's token for `target` when it may be used as it is at `now`; undefined when a grant is due. No promise, no I/O (the hot path). */
  peek(record: TokenRecord, target: TokenTarget, now: number): TargetToken | undefined {
    const token = record.targets?.[target.id];
    return token !== undefined && !needsRefresh(token, this.#options.refreshSkewMs, now) ? token : undefined;
  }

  /**
   * The user's fresh token for `target`, granted now if needed.
   * @throws GH_ERR_TOKEN_REFUSED (403) when the AS refuses this target; GH_ERR_SESSION_REQUIRED when the
   *   refresh token is dead (every session of the user ended); GH_ERR_PROVIDER_UNAVAILABLE when the AS cannot answer.
   */
  async fresh(record: TokenRecord, target: TokenTarget, log: FastifyBaseLogger): Promise<TargetGrant> {
    const token = this.peek(record, target, this.#options.clock.now());
    if (token !== undefined) return { record, token };
    return this.#singleFlight(record.userId, target, log, undefined);
  }

  /**
   * A new token for `target` after an upstream refused `rejected` although
   * it looked fresh; when the stored one is already another, that one.
   */
  async replace(userId: string, target: TokenTarget, rejected: string, log: FastifyBaseLogger): Promise<TargetGrant> {
    return this.#singleFlight(userId, target, log, rejected);
  }

  #singleFlight(userId: string, target: TokenTarget, log: FastifyBaseLogger, rejected: string | undefined): Promise<TargetGrant> {
    const key = `${userId}\n${target.id}`;
    const running = this.#inFlight.get(key);
    if (running) {
      this.#options.refreshes.inc({ target: target.label, result: 'joined' });
      return running;
    }
    const grant = this.#grantUnderLock(userId, target, log, rejected).finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, grant);
    return grant;
  }

  #grantUnderLock(userId: string, target: TokenTarget, log: FastifyBaseLogger, rejected: string | undefined): Promise<TargetGrant> {
    return this.#options.refresher.underLock(userId, async (current) => {
      // Re-checked under the lock: another request, on any replica, may have obtained it meanwhile.
      const stored = current.targets?.[target.id];
      const usable = rejected === undefined ? this.peek(current, target, this.#options.clock.now()) : stored?.accessToken === rejected ? undefined : stored;
      if (usable !== undefined) {
        this.#options.refreshes.inc({ target: target.label, result: 'joined' });
        return { record: current, token: usable };
      }
      return target.kind === 'exchange' ? this.#exchange(current, target, log) : this.#refreshFor(current, target, log);
    });
  }

  /** A refresh grant asking for the target's resource and scopes (RFC 8707 §2.2, RFC 6749 §6). */
  async #refreshFor(current: TokenRecord, target: TokenTarget, log: FastifyBaseLogger): Promise<TargetGrant> {
    const refreshToken = current.refreshToken;
    if (refreshToken === undefined) {
      this.#options.refreshes.inc({ target: target.label, result: 'failed' });
      log.info({ userId: shown(current), target: target.label }, 'token target needs a refresh token, and none was issued');
      throw refused(current);
    }
    const parameters: Record<string, string> = {};
    if (target.resource !== undefined) parameters.resource = target.resource;
    if (target.scope !== undefined) parameters.scope = target.scope;
    const sentAt = this.#options.clock.now();
    let response: oidc.TokenEndpointResponse;
    try {
      const options = await this.#dpopOptions(current);
      response = await traceAsCall('refresh', () => oidc.refreshTokenGrant(this.#options.providers.of(current).provider.configuration, refreshToken, parameters, options));
    } catch (err) {
      throw await this.#failure(err, current, target, log, true);
    }
    // With rotation the refresh token just used is dead: the new one is kept whatever happens next.
    const rotated = typeof response.refresh_token === 'string' ? response.refresh_token : refreshToken;
    return this.#keep(current, { ...current, refreshToken: rotated }, response, sentAt, target, log);
  }

  /** A token exchange of the user's sign-in token (RFC 8693 §2.1), refreshed first when stale. */
  async #exchange(current: TokenRecord, target: TokenTarget, log: FastifyBaseLogger): Promise<TargetGrant> {
    const base = target.subjectToken === 'access' ? await this.#options.refresher.freshUnderLock(current, log) : current;
    const subject = target.subjectToken === 'access' ? base.accessToken : base.idToken;
    if (subject === undefined) {
      this.#options.refreshes.inc({ target: target.label, result: 'failed' });
      log.info({ userId: shown(base), target: target.label }, 'token target needs an ID token, and none was issued');
      throw refused(base);
    }
    const parameters: Record<string, string> = {
      subject_token: subject,
      subject_token_type: target.subjectToken === 'access' ? ACCESS_TOKEN_TYPE : ID_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
    };
    if (target.audience !== undefined) parameters.audience = target.audience;
    if (target.resource !== undefined) parameters.resource = target.resource;
    if (target.scope !== undefined) parameters.scope = target.scope;
    const sentAt = this.#options.clock.now();
    let response: oidc.TokenEndpointResponse;
    try {
      const options = await this.#dpopOptions(base);
      response = await traceAsCall('token', () => oidc.genericGrantRequest(this.#options.providers.of(base).provider.configuration, TOKEN_EXCHANGE_GRANT, parameters, options));
    } catch (err) {
      throw await this.#failure(err, base, target, log, false);
    }
    return this.#keep(base, base, response, sentAt, target, log);
  }

  /** Stores the target's new token in the user's record (and a rotated refresh token); an unusable answer is 503. */
  async #keep(before: TokenRecord, next: TokenRecord, response: oidc.TokenEndpointResponse, sentAt: number, target: TokenTarget, log: FastifyBaseLogger): Promise<TargetGrant> {
    const { refresher, refreshes, defaultLifetime } = this.#options;
    const bound = this.#options.providers.of(before).dpop !== undefined && before.dpopKey !== undefined;
    let token: TargetToken;
    try {
      const issued = readTokenResponse(response, sentAt, defaultLifetime, bound ? 'dpop' : 'bearer');
      token = { accessToken: issued.accessToken, expiresAt: issued.expiresAt, lifetime: issued.lifetime, ...(bound ? { bound: true as const } : {}) };
    } catch (err) {
      refreshes.inc({ target: target.label, result: 'failed' });
      log.warn({ userId: shown(before), target: target.label, failure: describeFailure(err) }, 'token target response unusable');
      if (next.refreshToken !== before.refreshToken) await refresher.persistUnderLock(next, before.refreshToken, log);
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    const record: TokenRecord = { ...next, targets: { ...next.targets, [target.id]: token } };
    await refresher.persistUnderLock(record, before.refreshToken, log);
    refreshes.inc({ target: target.label, result: 'ok' });
    log.info({ userId: shown(before), target: target.label, rotated: next.refreshToken !== before.refreshToken }, 'target token obtained');
    return { record, token };
  }

  /**
   * What a failed grant means for the request: a refusal of this target
   * (403, everything kept); for a refresh grant, any other definite refusal
   * kills the refresh token, and with it every session of the user (as a
   * rejected refresh does, README "What the browser sees"); for an exchange,
   * the sign-in grant is not at stake and the target is refused; no answer
   * worth keeping (network, timeout, 5xx, 408, 429) is 503 and keeps all.
   */
  async #failure(err: unknown, current: TokenRecord, target: TokenTarget, log: FastifyBaseLogger, refreshGrant: boolean): Promise<Error> {
    const { refreshes, store } = this.#options;
    const { provider } = this.#options.providers.of(current);
    refreshes.inc({ target: target.label, result: 'failed' });
    const failure = describeFailure(err, provider.ready ? provider.configuration.serverMetadata().token_endpoint : undefined);
    const fields = { userId: shown(current), target: target.label, failure };
    const kind = classifyProviderFailure(err);
    if (kind === 'unreachable') {
      log.warn(fields, 'token target grant failed');
      return gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    const error = (err as { error?: unknown }).error;
    if (kind === 'rejected' && refreshGrant && !(typeof error === 'string' && TARGET_REFUSALS.has(error))) {
      log.info(fields, 'refresh rejected');
      await endSessionsOf(store, current, everySession);
      return gatehouseError('GH_ERR_SESSION_REQUIRED', { cause: err });
    }
    if (kind === 'unusable') {
      log.warn(fields, 'token target response unusable');
      return gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    log.info(fields, 'token target refused');
    return refused(current, err);
  }

  async #dpopOptions(record: TokenRecord): Promise<oidc.DPoPOptions | undefined> {
    const { dpop } = this.#options.providers.of(record);
    // A record from before `dpop` was turned on has no key: its target tokens stay Bearer until a sign-in refresh binds one.
    return dpop && record.dpopKey ? { DPoP: await dpop.handle(record.dpopKey) } : undefined;
  }
}

function shown(record: TokenRecord): string {
  return record.user ?? record.userId;
}

function refused(record: TokenRecord, cause?: unknown): Error {
  return gatehouseError('GH_ERR_TOKEN_REFUSED', { detail: shown(record), ...(cause === undefined ? {} : { cause }) });
}
