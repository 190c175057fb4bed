import type { TokenEndpointResponse } from 'openid-client';
import type { TokenRecord } from '../session/store.js';

/** The parts of a token response the gateway keeps, with expiry resolved (README "Configuration" `tokens`). */
export interface IssuedTokens {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  expiresAt: number;
  lifetime: number;
}

/**
 * Reads a token response. Expiry is counted from when the request was sent
 * (`sentAt`), so network time shortens the token's life rather than extending
 * it; without `expires_in` the configured default lifetime applies. The access
 * token stays opaque: it is never parsed.
 * @param tokenType `dpop` with `provider.dpop`, else `bearer`: a DPoP-bound
 *   token is useless without its key, and a Bearer token where DPoP was asked
 *   for would silently drop the binding (RFC 9449 §5), so either mismatch is
 *   an unusable answer of the AS.
 * @throws Error when the token type is not the expected one (compared case-insensitively, RFC 6749 §5.1).
 */
export function readTokenResponse(response: TokenEndpointResponse, sentAt: number, defaultLifetime: number, tokenType: 'bearer' | 'dpop' = 'bearer'): IssuedTokens {
  if (response.token_type.toLowerCase() !== tokenType) {
    throw new TypeError(`token_type ${response.token_type} is not supported: the gateway expects ${tokenType === 'dpop' ? 'DPoP' : 'Bearer'} tokens`);
  }
  const lifetime = typeof response.expires_in === 'number' && response.expires_in > 0 ? response.expires_in : defaultLifetime;
  return {
    accessToken: response.access_token,
    refreshToken: response.refresh_token,
    idToken: response.id_token,
    expiresAt: sentAt + lifetime * 1000,
    lifetime,
  };
}

/**
 * Whether an access token must be refreshed before use: expired, or within the
 * skew, the skew being at most half the token's lifetime (README "Configuration").
 */
export function needsRefresh(record: Pick<TokenRecord, 'expiresAt' | 'lifetime'>, refreshSkewMs: number, now: number): boolean {
  const skew = Math.min(refreshSkewMs, (record.lifetime * 1000) / 2);
  return now >= record.expiresAt - skew;
}
