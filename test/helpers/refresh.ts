import type { KoaContextWithOIDC } from 'oidc-provider';
import type { AuthorizationServer } from '../../src/demo/authorization-server.js';
import { CLIENT_ID, type Harness } from './harness.js';
import { introspect } from './authorization-server-watch.js';
import { waitFor } from './wait-for.js';
import type { TokenRecord } from '../../src/session/store.js';
import { openIdUserKey } from '../../src/oauth/identify.js';

/** An AS TTL: `seconds` for tokens from a sign-in, ten minutes for refreshed ones (so only the first expires during a test). */
export function shortLoginTokens(seconds: number) {
  return (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? 600 : seconds);
}

/** The refresh-token grant requests the AS received, with the parameters it parsed. */
export function watchRefreshGrants(as: AuthorizationServer): Array<Record<string, unknown>> {
  const seen: Array<Record<string, unknown>> = [];
  const record = (ctx: KoaContextWithOIDC) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') seen.push({ ...ctx.oidc.params });
  };
  as.provider.on('grant.success', record);
  as.provider.on('grant.error', record);
  return seen;
}

/** The key of the token record of the AS's user `sub` (iss + sub, src/oauth/identify.ts). */
export function userKey(h: Pick<Harness, 'gateway'>, sub: string): string {
  return openIdUserKey(h.gateway.context.providers.default.provider.configuration.serverMetadata().issuer, sub);
}

/** The token record of the AS's user `sub` as the gateway stored it (read past the cache). */
export async function storedTokens(h: Pick<Harness, 'gateway'>, sub: string): Promise<TokenRecord | null> {
  return h.gateway.context.store.getTokens(userKey(h, sub), true);
}

/** Waits until the AS itself calls the access token expired. */
export async function waitUntilExpired(h: Harness, accessToken: string): Promise<void> {
  await waitFor('the access token to expire at the AS', async () => !(await introspect(h.as, accessToken, 'access_token')).active);
}

/** Revokes a refresh token at the AS as the gateway's client would (which revokes its whole grant). */
export async function revokeAtAuthorizationServer(h: Harness, refreshToken: string): Promise<void> {
  const response = await fetch(`${h.as.listenUrl}/token/revocation`, {
    method: 'POST',
    body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token', client_id: CLIENT_ID, client_secret: h.clientSecret }),
  });
  if (response.status !== 200) throw new Error(`revocation answered ${response.status}`);
}
