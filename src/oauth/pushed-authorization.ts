import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import { classifyProviderFailure, describeFailure } from './provider.js';
import { gatehouseError } from '../errors.js';

/**
 * Whether `/login` pushes its authorization request (RFC 9126 §2):
 * `required` always, `auto` when the metadata names a
 * `pushed_authorization_request_endpoint`, `off` never.
 */
export function pushesAuthorization(mode: Config['provider']['pushedAuthorization'], configuration: oidc.Configuration): boolean {
  if (mode === 'off') return false;
  return mode === 'required' || configuration.serverMetadata().pushed_authorization_request_endpoint !== undefined;
}

/**
 * The authorization URL for `parameters`. Pushed, the parameters (state,
 * PKCE challenge, nonce, redirect_uri, scope) travel over the back channel,
 * authenticated like a token request, and the browser is given only
 * `client_id` and the one-time `request_uri` (RFC 9126 §4): nothing in the
 * front channel can be read or altered.
 * @throws GH_ERR_PROVIDER_UNAVAILABLE when the AS cannot answer; GH_ERR_LOGIN_PUSH_REJECTED when it refuses.
 */
export async function authorizationUrl(
  configuration: oidc.Configuration,
  parameters: URLSearchParams,
  push: boolean,
  log: FastifyBaseLogger,
): Promise<URL> {
  if (!push) return oidc.buildAuthorizationUrl(configuration, parameters);
  if (configuration.serverMetadata().pushed_authorization_request_endpoint === undefined) {
    log.error('provider.pushedAuthorization is required but the authorization server offers no pushed authorization request endpoint');
    throw gatehouseError('GH_ERR_LOGIN_PUSH_REJECTED');
  }
  try {
    return await oidc.buildAuthorizationUrlWithPAR(configuration, parameters);
  } catch (err) {
    const failure = describeFailure(err);
    if (classifyProviderFailure(err) === 'unreachable') {
      log.warn({ failure }, 'pushed authorization request failed');
      throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE', { cause: err });
    }
    log.warn({ failure }, 'pushed authorization request refused');
    throw gatehouseError('GH_ERR_LOGIN_PUSH_REJECTED', { cause: err });
  }
}
