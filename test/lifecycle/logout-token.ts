import { generateKeyPairSync, sign } from 'node:crypto';
import type { AuthorizationServer } from '../../src/demo/authorization-server.js';
import { CookieJar } from '../helpers/cookie-jar.js';

export const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** What a test wants in a logout token the AS signs; `events: null` leaves the claim out. */
export interface LogoutTokenClaims {
  sub?: string;
  sid?: string;
  jti?: string;
  events?: Record<string, unknown> | null;
  nonce?: string;
}

/**
 * A logout token signed by the real authorization server with its own key,
 * built as oidc-provider's Client#backchannelLogout builds one, for `clientId`
 * (its `aud`).
 * @example const token = await signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid });
 */
export async function signedByAs(as: AuthorizationServer, clientId: string, claims: LogoutTokenClaims): Promise<string> {
  const client = await as.provider.Client.find(clientId);
  if (!client) throw new Error(`no client ${clientId}`);
  const token = new as.provider.IdToken(claims.sub === undefined ? {} : { sub: claims.sub }, { client });
  (token as unknown as { mask: Record<string, null> }).mask = claims.sub === undefined ? {} : { sub: null };
  if (claims.events !== null) token.set('events', claims.events ?? { [BACKCHANNEL_EVENT]: {} });
  token.set('jti', claims.jti ?? crypto.randomUUID());
  if (claims.sid !== undefined) token.set('sid', claims.sid);
  if (claims.nonce !== undefined) token.set('nonce', claims.nonce);
  return token.issue({ use: 'logout' });
}

/** The same claims as `valid`, re-signed with a key the AS never published, under the AS key's `kid`. */
export function resignedWithForeignKey(valid: string): string {
  const [header, payload] = valid.split('.') as [string, string];
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const signature = sign('sha256', Buffer.from(`${header}.${payload}`), privateKey).toString('base64url');
  return `${header}.${payload}.${signature}`;
}

/** The payload of a JWT, unverified (for a test reading what the AS put in an ID token). */
export function jwtPayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** POSTs a logout token to the gateway as the AS does (form-encoded). */
export function postLogoutToken(gatewayUrl: string, token: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gatewayUrl}/backchannel-logout`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ logout_token: token }),
  });
}

/**
 * The user signs out at the authorization server itself (its end-session
 * page, "Yes, sign me out"), with the AS cookies of the browser that signed in.
 */
export async function signOutAtAuthorizationServer(as: AuthorizationServer, jar: CookieJar): Promise<void> {
  const page = await jar.fetch(`${as.url}/session/end`);
  const html = await page.text();
  const action = /<form id="op\.logoutForm" method="post" action="([^"]+)"/.exec(html)?.[1];
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)?.[1];
  if (page.status !== 200 || action === undefined || xsrf === undefined) throw new Error(`no logout form at the AS: ${page.status} ${html.slice(0, 300)}`);
  const confirmed = await jar.fetch(new URL(action, as.url), { method: 'POST', body: new URLSearchParams({ xsrf, logout: 'yes' }) });
  await confirmed.arrayBuffer();
  if (confirmed.status >= 400) throw new Error(`the AS refused the logout confirmation: ${confirmed.status}`);
}
