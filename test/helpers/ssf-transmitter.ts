import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';

export const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
export const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change';
export const ACCOUNT_DISABLED = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled';

/** A loopback OpenID Shared Signals transmitter: its own keys, its JWKS over HTTP, and SETs signed with them. */
export interface Transmitter {
  issuer: string;
  jwksUri: string;
  /** How often the JWKS was fetched. */
  jwksFetches: number;
  /**
   * A SET (RFC 8417) with `iss`, `aud`, `iat` (now), a fresh `jti` and the
   * given claims over those, signed with the transmitter's ES256 key unless
   * `with` names another key, algorithm or header.
   */
  sign(claims: JWTPayload, options?: { key?: CryptoKey | Uint8Array; alg?: string; kid?: string; typ?: string }): Promise<string>;
  /** The same, with `alg: none` and no signature. */
  unsigned(claims: JWTPayload): string;
  close(): Promise<void>;
}

/** Starts a transmitter on loopback that SETs are addressed `aud` from. */
export async function startTransmitter(audience: string): Promise<Transmitter> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'ssf-1', alg: 'ES256', use: 'sig' };
  const server = createServer((request, response) => {
    if (request.url !== '/jwks') return void response.writeHead(404).end();
    transmitter.jwksFetches += 1;
    response.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const fill = (claims: JWTPayload): JWTPayload => ({ iss: base, aud: audience, iat: Math.floor(Date.now() / 1000), jti: randomUUID(), ...claims });
  const transmitter: Transmitter = {
    issuer: base,
    jwksUri: `${base}/jwks`,
    jwksFetches: 0,
    async sign(claims, options = {}) {
      return new SignJWT(fill(claims))
        .setProtectedHeader({ alg: options.alg ?? 'ES256', kid: options.kid ?? 'ssf-1', typ: options.typ ?? 'secevent+jwt' })
        .sign(options.key ?? privateKey);
    },
    unsigned(claims) {
      const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
      return `${part({ alg: 'none', typ: 'secevent+jwt' })}.${part(fill(claims))}.`;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return transmitter;
}

/** Pushes a SET to `url` as RFC 8935 says: POST, `Content-Type: application/secevent+jwt`. */
export async function push(url: string, set: string, contentType = 'application/secevent+jwt'): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': contentType, accept: 'application/json' }, body: set });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
}
