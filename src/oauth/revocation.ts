import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import { describeFailure, type Provider } from './provider.js';
import { traceAsCall } from '../tracing/tracing.js';

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
