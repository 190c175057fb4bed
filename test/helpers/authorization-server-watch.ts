import type { KoaContextWithOIDC } from 'oidc-provider';
import type { AuthorizationServer } from '../../src/demo/authorization-server.js';
import { CookieJar } from './cookie-jar.js';

/** Tokens one successful token-endpoint call issued. */
export interface IssuedTokens {
  grantType: string;
  accessToken?: string;
  refreshToken?: string;
  idToken?: string;
  /** The authorization code and PKCE verifier the client sent (code grants). */
  code?: string;
  codeVerifier?: string;
}

/** What the AS's token endpoint saw, from its own events (no proxy, no mock). */
export interface TokenEndpointWatch {
  /** Authorization-code grant requests, successful or not. */
  codeExchanges: number;
  /** Every grant request of any type, successful or not. */
  requests: number;
  issued: IssuedTokens[];
}

/**
 * Counts the token-endpoint requests of a real oidc-provider and keeps the
 * tokens it issued, so a test can prove "no token request" or look a token up.
 * @example const watch = watchTokenEndpoint(h.as); ...; t.equal(watch.codeExchanges, 0);
 */
export function watchTokenEndpoint(as: AuthorizationServer): TokenEndpointWatch {
  const watch: TokenEndpointWatch = { codeExchanges: 0, requests: 0, issued: [] };
  const count = (ctx: KoaContextWithOIDC) => {
    watch.requests += 1;
    if (ctx.oidc?.params?.grant_type === 'authorization_code') watch.codeExchanges += 1;
  };
  as.provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    count(ctx);
    const body = ctx.body as Record<string, string | undefined>;
    watch.issued.push({
      grantType: String(ctx.oidc.params?.grant_type),
      accessToken: body.access_token,
      refreshToken: body.refresh_token,
      idToken: body.id_token,
      code: ctx.oidc.params?.code as string | undefined,
      codeVerifier: ctx.oidc.params?.code_verifier as string | undefined,
    });
  });
  as.provider.on('grant.error', count);
  return watch;
}

/** RFC 7662 introspection at the AS itself, as the resource-server client: is the token still alive? */
export async function introspect(as: AuthorizationServer, token: string, hint: 'access_token' | 'refresh_token'): Promise<{ active: boolean } & Record<string, unknown>> {
  const { clientId, clientSecret } = as.introspection;
  const response = await fetch(`${as.listenUrl}/token/introspection`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
    body: new URLSearchParams({ token, token_type_hint: hint }),
  });
  if (response.status !== 200) throw new Error(`introspection answered ${response.status}`);
  return (await response.json()) as { active: boolean };
}

/**
 * The user presses "Cancel" on the AS's login page (oidc-provider's
 * devInteractions abort link): returns the redirect_uri URL the AS sends the
 * browser to, carrying `error=access_denied` and the state.
 */
export async function denyAtAuthorizationServer(authorizationUrl: URL): Promise<URL> {
  const redirectUri = new URL(authorizationUrl.searchParams.get('redirect_uri')!);
  const jar = new CookieJar();
  let url = authorizationUrl;
  for (let hop = 0; hop < 10; hop += 1) {
    const response = await jar.fetch(url);
    const body = await response.text();
    if (response.status >= 300 && response.status < 400) {
      url = new URL(response.headers.get('location')!, url);
      if (url.origin === redirectUri.origin && url.pathname === redirectUri.pathname) return url;
    } else {
      const abort = /href="([^"]*\/abort)"/.exec(body)?.[1];
      if (abort === undefined) throw new Error(`no abort link at ${url.href}: ${body.slice(0, 300)}`);
      url = new URL(abort.replaceAll('&amp;', '&'), url);
    }
  }
  throw new Error('the authorization server did not return to the redirect_uri');
}
