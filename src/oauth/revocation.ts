import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import { describeFailure, type Provider } from './provider.js';
import { traceAsCall } from '../tracing/tracing.js';
import { endSessions, type EndedSessions } from '../session/ending.js';
import type { SessionStore, TokenRecord } from '../session/store.js';
import type { ProviderRegistry } from './providers.js';

/**
 * Revokes a refresh token at the revocation endpoint (RFC 7009), when the
 * authorization server has one. A failure is logged, never thrown: the
 * gateway has already forgotten the token, and the user is signed out either way.
 */
export async function revokeRefreshToken(provider: Provider, refreshToken: string, log: FastifyBaseLogger): Promise<void> {
  if (!provider.ready || provider.configuration.serverMetadata().revocation_endpoint === undefined) return;
  try {
    await traceAsCall('revocation', () => oidc.tokenRevocation(provider.configuration, refreshToken, { token_type_hint: 'refresh_token' }));
  } catch (err) {
    log.warn({ failure: describeFailure(err, provider.configuration.serverMetadata().revocation_endpoint) }, 'refresh token revocation failed');
  }
}

/**
 * Ends every session of the user whose record key is `userId`, on every
 * replica, and revokes the refresh token, as a logout everywhere does: the
 * session API's `DELETE /sessions?user=` and an identity provider's security
 * event (README "Ending sessions"). Null when the user has no record.
 */
export async function endEverySession(store: SessionStore, providers: ProviderRegistry, userId: string, log: FastifyBaseLogger): Promise<EndedSessions | null> {
  const result = await endSessions(store, userId, () => true);
  if (result?.record.refreshToken !== undefined) await revokeAtItsProvider(providers, result.record, log);
  return result;
}

/** Revokes a record's refresh token at the provider that issued it (README "Several identity providers"); none for a provider no longer configured. */
export async function revokeAtItsProvider(providers: ProviderRegistry, record: TokenRecord, log: FastifyBaseLogger): Promise<void> {
  const client = providers.get(record.provider);
  if (client !== undefined && record.refreshToken !== undefined) await revokeRefreshToken(client.provider, record.refreshToken, log);
}

/**
 * What a browser's sign-out does, and an idle session's end: the session
 * `hash` is deleted at once (even without a token record), then the
 * sessions `selected` picks leave the user's record, and the last one out
 * revokes the refresh token at the authorization server (README "What the
 * browser sees", /logout).
 */
export async function endSessionsAndRevoke(
  context: { store: SessionStore; providers: ProviderRegistry },
  log: FastifyBaseLogger,
  userId: string,
  hash: string,
  selected: (hash: string) => boolean | Promise<boolean>,
): Promise<EndedSessions | null> {
  await context.store.deleteSession(hash);
  const result = await endSessions(context.store, userId, selected);
  if (result?.lastOut) await revokeAtItsProvider(context.providers, result.record, log);
  return result;
}
