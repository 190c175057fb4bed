import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { SignJWT, type JWK, type JWTPayload } from 'jose';

/** One signing key of the issuer: its private half signs, its public JWK is published while `published`. */
export interface IssuerKey {
  kid: string;
  alg: 'ES256' | 'RS256';
  privateKey: KeyObject;
  publicKey: KeyObject;
  publicJwk: JWK;
  published: boolean;
}

/** What the issuer answers: `up`, `down` (connections reset), `error500` (the key set and discovery answer 500). */
export type IssuerMode = 'up' | 'down' | 'error500';

/**
 * A loopback JWT issuer the way Kubernetes or GitHub Actions are one:
 * an OpenID Connect discovery document naming a JWKS, keys it rotates, and
 * tokens it signs. Counts the fetches of each document, so a test can
 * prove the gateway's caching (no mock: a real HTTP server on port 0).
 * @example const issuer = await JwtIssuer.start(); const token = await issuer.sign({ sub: 'job', aud: 'gatehouse' });
 */
export class JwtIssuer {
  readonly url: string;
  readonly jwksUrl: string;
  keys: IssuerKey[] = [];
  mode: IssuerMode = 'up';
  /** The `issuer` the discovery document names (a test sets another to prove it is checked). */
  discoveryIssuer: string;
  fetches = { discovery: 0, jwks: 0 };
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  private constructor(server: Server, url: string) {
    this.#server = server;
    this.url = url;
    this.jwksUrl = `${url}/keys`;
    this.discoveryIssuer = url;
    server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    server.on('request', (req, res) => {
      if (this.mode === 'down') {
        req.socket.destroy();
        return;
      }
      const path = req.url ?? '/';
      if (path === '/.well-known/openid-configuration') this.fetches.discovery += 1;
      else if (path === '/keys') this.fetches.jwks += 1;
      else {
        res.writeHead(404).end();
        return;
      }
      if (this.mode === 'error500') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('down for maintenance');
        return;
      }
      const body =
        path === '/keys'
          ? { keys: this.keys.filter((key) => key.published).map((key) => key.publicJwk) }
          : { issuer: this.discoveryIssuer, jwks_uri: this.jwksUrl, response_types_supported: ['id_token'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['ES256', 'RS256'] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  }

  static async start(options: { alg?: 'ES256' | 'RS256' } = {}): Promise<JwtIssuer> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const issuer = new JwtIssuer(server, `http://127.0.0.1:${port}`);
    issuer.rotate(options.alg);
    return issuer;
  }

  /** The key tokens are signed with by default: the newest. */
  get current(): IssuerKey {
    return this.keys.at(-1)!;
  }

  /** Publishes a new key and signs with it from now on; `retireOld` unpublishes every earlier key. */
  rotate(alg: 'ES256' | 'RS256' = 'ES256', retireOld = false): IssuerKey {
    if (retireOld) for (const key of this.keys) key.published = false;
    const key = JwtIssuer.newKey(alg);
    this.keys.push(key);
    return key;
  }

  /** A key pair this issuer never published (an impostor's). */
  static newKey(alg: 'ES256' | 'RS256' = 'ES256', kid = randomBytes(6).toString('hex')): IssuerKey {
    const { privateKey, publicKey } = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 });
    return { kid, alg, privateKey, publicKey, publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' }, published: true };
  }

  /**
   * A signed token: `iss` this issuer, `iat` now, `exp` in 10 minutes unless
   * the claims say otherwise; `key` another key (same kid as the current one: a forgery).
   */
  async sign(claims: JWTPayload, options: { key?: IssuerKey; kid?: string; typ?: string } = {}): Promise<string> {
    const key = options.key ?? this.current;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: this.url, iat: now, exp: now + 600, ...claims })
      .setProtectedHeader({ alg: key.alg, kid: options.kid ?? key.kid, ...(options.typ === undefined ? {} : { typ: options.typ }) })
      .sign(key.privateKey);
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** base64url of a JSON value: the parts of a hand-made JWS. */
export function b64json(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
