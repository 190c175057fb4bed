import * as oidc from 'openid-client';
import type { Provider } from './provider.js';
import { ProviderAnswerError } from '../errors.js';
import { traceAsCall } from '../tracing/tracing.js';

/** Who signed in, and the claims /session shows. */
export interface Identity {
  userId: string;
  claims: Record<string, unknown>;
}

/** ID token claims that describe the token itself, not the user. */
const TOKEN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash', 'azp'];
const MAX_USER_ID_LENGTH = 512;

/**
 * Identifies the user after the code exchange: from `userIdClaim` of the
 * validated ID token, else from userinfo (README "Configuration"). Without an issuer (plain
 * OAuth 2.0) only userinfo counts: any JSON object, the id being its
 * `userIdClaim` value, string or number.
 * @returns undefined when the AS names no usable user id
 */
export async function identify(
  provider: Provider,
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  userIdClaim: string,
): Promise<Identity | undefined> {
  const configuration = provider.configuration;
  let claims: Record<string, unknown> = {};
  if (provider.isOpenIdProvider && response.id_token !== undefined) {
    claims = { ...response.claims() };
    for (const name of TOKEN_CLAIMS) delete claims[name];
  }
  if (claims[userIdClaim] === undefined && configuration.serverMetadata().userinfo_endpoint !== undefined) {
    const subject = claims.sub;
    claims = { ...claims, ...(await traceAsCall('userinfo', () => fetchUserinfo(provider, response.access_token, subject))) };
  }
  const userId = claims[userIdClaim];
  if ((typeof userId !== 'string' && typeof userId !== 'number') || String(userId).length === 0 || String(userId).length > MAX_USER_ID_LENGTH) {
    return undefined;
  }
  return { userId: String(userId), claims };
}

async function fetchUserinfo(provider: Provider, accessToken: string, subject: unknown): Promise<Record<string, unknown>> {
  const configuration = provider.configuration;
  if (provider.isOpenIdProvider) {
    // OIDC Core §5.3.4: the userinfo sub must equal the ID token's.
    return oidc.fetchUserInfo(configuration, accessToken, typeof subject === 'string' ? subject : oidc.skipSubjectCheck);
  }
  const endpoint = new URL(configuration.serverMetadata().userinfo_endpoint!);
  const response = await oidc.fetchProtectedResource(configuration, accessToken, endpoint, 'GET', undefined, new Headers({ accept: 'application/json' }));
  if (!response.ok) throw new ProviderAnswerError('userinfo request failed', response.status);
  const body: unknown = await response.json();
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ProviderAnswerError('userinfo is not a JSON object', 502);
  return body as Record<string, unknown>;
}
