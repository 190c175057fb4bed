import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logger.js';
import { startGateway, type RunningGateway } from '../../src/server.js';
import { startAuthorizationServer, type AuthorizationServer, type AuthorizationServerOptions } from '../../src/demo/authorization-server.js';
import { startUpstream, type Upstream } from '../../src/demo/upstream.js';
import { SwitchableProxy } from './switchable-proxy.js';
import { pseudonym, pseudonymKey } from '../../src/pseudonym.js';
import type { Clock } from '../../src/clock.js';

export const CLIENT_ID = 'gatehouse-test';

export interface HarnessOptions {
  /** Seconds the AS gives access tokens (default 60), or oidc-provider's TTL function (e.g. by `ctx.oidc.params.grant_type`). */
  accessTokenTtl?: AuthorizationServerOptions['accessTokenTtl'];
  /** Seconds the AS gives refresh tokens (default one day). */
  refreshTokenTtl?: number;
  rotateRefreshTokens?: boolean;
  issueRefreshTokens?: boolean;
  /** Register the gateway's `/backchannel-logout` at the AS, which then POSTs logout tokens there (and puts `sid` in ID tokens). */
  backchannelLogout?: boolean;
  authMethod?: 'client_secret_post' | 'client_secret_basic' | 'none' | 'private_key_jwt';
  /** With `private_key_jwt`: the client key's type (default `ec`, P-256); its public half is registered at the AS. */
  clientKeyType?: 'ec' | 'rsa';
  /** The AS offers pushed authorization requests (RFC 9126); `required` also makes the client require them. */
  pushedAuthorization?: 'on' | 'required';
  /** The AS binds the client's access tokens to DPoP keys and refuses token requests without a proof (RFC 9449). */
  dpopBound?: boolean;
  /** The AS demands its own nonce in every DPoP proof (RFC 9449 §8). */
  dpopNonces?: boolean;
  /** false: the AS does not support DPoP at all, and issues Bearer tokens whatever the client sends. */
  dpopSupported?: boolean;
  /** Extra config, merged section by section over the harness's own; a function receives the started AS. */
  config?: Record<string, unknown> | ((as: AuthorizationServer) => Record<string, unknown>);
  /** Session store URL; default a fresh sqlite file in a temp dir. */
  store?: string;
  /** Start the gateway while the AS proxy is 'down' (set `asProxy.mode = 'up'` to let discovery succeed). */
  asDownAtStart?: boolean;
  /**
   * Host name in the AS's issuer URL (default `127.0.0.1`, the address it
   * listens on). `localhost` puts the AS on another site than the gateway
   * (`http://127.0.0.1:PORT`), as in production, which matters to a browser's
   * SameSite rules.
   */
  authorizationServerHost?: '127.0.0.1' | 'localhost';
  /** Claims some users have besides sub, name and email (user -> claims, e.g. `groups`). */
  extraClaims?: AuthorizationServerOptions['extraClaims'];
  /** Services with client-credentials tokens at the AS; the gateway's client may then introspect any token (README "Machine clients"). */
  machineClients?: ReadonlyArray<{ clientId: string; clientSecret: string }>;
  /** The gateway's clock (a TestClock lets a test skip ahead instead of sleeping); default the system clock. */
  clock?: Clock;
  /** Resource indicators (RFC 8707) the AS knows; resource indicators are off without it. */
  resourceServers?: AuthorizationServerOptions['resourceServers'];
  /** The AS offers token exchange (RFC 8693) for these audiences/resources, and the gateway's client may use it. */
  tokenExchange?: AuthorizationServerOptions['tokenExchange'];
  /** Scopes the AS knows besides the demo's own. */
  extraScopes?: AuthorizationServerOptions['extraScopes'];
  /** Two sign-in strengths at the AS (`acr` with and without a one-time code), for step-up tests. */
  signInLevels?: AuthorizationServerOptions['signInLevels'];
  /** Host name of publicUrl (default `127.0.0.1`): `auth.localhost` for a sign-in host of several sites (README "Several sites"); the gateway still listens on 127.0.0.1. */
  publicHost?: string;
  /**
   * Named providers beside the default one (README "Several identity
   * providers"): for each name a real authorization server of its own (its
   * own issuer and keys), where the gateway's client is registered with the
   * same redirect URI; the gateway gets it as `providers.NAME`.
   */
  namedProviders?: Record<string, { backchannelLogout?: boolean }>;
}

/** A real AS (behind a switchable proxy), a real upstream and a gateway, all on loopback. */
export interface Harness {
  gateway: RunningGateway;
  /** Public URL of the gateway. */
  url: string;
  as: AuthorizationServer;
  asProxy: SwitchableProxy;
  upstream: Upstream;
  clientSecret: string;
  /** With `private_key_jwt`: the client's private key, PEM, as the gateway was given it. */
  clientPrivateKey?: string;
  /** The authorization servers of `namedProviders`, by name. */
  named: Record<string, AuthorizationServer>;
  /** Every log line the gateway wrote, parsed. */
  logs: Array<Record<string, unknown>>;
  /** The raw log text, for scanning for secrets. */
  logText(): string;
  /** A directory removed by close(). */
  dir: string;
  /** The config document the gateway was started with (before defaults). */
  document: Record<string, Record<string, unknown> | string>;
  close(): Promise<void>;
}

/**
 * Starts the whole cast for one test file. The AS's issuer is the proxy's
 * URL, so `harness.asProxy.mode = 'down'` cuts the gateway off from the AS.
 * The gateway listens on an ephemeral port; publicUrl is learned from a port
 * reserved first.
 */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
  const asProxy = await SwitchableProxy.start();
  const port = await freePort();
  const publicUrl = `http://${options.publicHost ?? '127.0.0.1'}:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  const keyed = options.authMethod === 'private_key_jwt';
  const clientKey = keyed ? clientKeyPair(options.clientKeyType ?? 'ec') : undefined;
  const issuer = new URL(asProxy.url);
  issuer.hostname = options.authorizationServerHost ?? issuer.hostname;
  const as = await startAuthorizationServer({
    issuer: issuer.origin,
    clients: [
      {
        clientId: CLIENT_ID,
        clientSecret: options.authMethod === 'none' || keyed ? undefined : clientSecret,
        authMethod: options.authMethod ?? 'client_secret_post',
        ...(clientKey ? { jwks: { keys: [clientKey.publicJwk] } } : {}),
        requirePushedAuthorization: options.pushedAuthorization === 'required',
        dpopBoundAccessTokens: options.dpopBound ?? false,
        redirectUris: [`${publicUrl}/callback`],
        postLogoutRedirectUris: [`${publicUrl}/`],
        ...(options.backchannelLogout ? { backchannelLogoutUri: `${publicUrl}/backchannel-logout` } : {}),
        tokenExchange: options.tokenExchange !== undefined,
      },
    ],
    resourceServers: options.resourceServers,
    tokenExchange: options.tokenExchange,
    extraScopes: options.extraScopes,
    accessTokenTtl: options.accessTokenTtl ?? 60,
    refreshTokenTtl: options.refreshTokenTtl,
    rotateRefreshTokens: options.rotateRefreshTokens,
    issueRefreshTokens: options.issueRefreshTokens,
    pushedAuthorization: options.pushedAuthorization !== undefined,
    dpopNonces: options.dpopNonces ?? false,
    dpop: options.dpopSupported ?? true,
    extraClaims: options.extraClaims,
    ...(options.machineClients === undefined ? {} : { machineClients: options.machineClients, introspectors: [CLIENT_ID] }),
    signInLevels: options.signInLevels,
  });
  asProxy.target = as.listenUrl;
  const upstream = await startUpstream({
    introspectionEndpoint: `${as.listenUrl}/token/introspection`,
    clientId: as.introspection.clientId,
    clientSecret: as.introspection.clientSecret,
  });
  const named: Record<string, AuthorizationServer> = {};
  for (const [name, settings] of Object.entries(options.namedProviders ?? {})) {
    named[name] = await startAuthorizationServer({
      clients: [
        {
          clientId: CLIENT_ID,
          clientSecret: `${clientSecret}-${name}`,
          redirectUris: [`${publicUrl}/callback`],
          postLogoutRedirectUris: [`${publicUrl}/`],
          ...(settings.backchannelLogout ? { backchannelLogoutUri: `${publicUrl}/backchannel-logout` } : {}),
        },
      ],
      accessTokenTtl: options.accessTokenTtl ?? 60,
    });
  }
  const base: Record<string, Record<string, unknown> | string> = {
    server: { host: '127.0.0.1', port, publicUrl, shutdownGrace: 1 },
    admin: { host: '127.0.0.1', port: 0 },
    provider: {
      issuer: as.url,
      clientId: CLIENT_ID,
      clientAuthMethod: options.authMethod ?? 'client_secret_post',
      ...(options.authMethod === 'none' || keyed ? {} : { clientSecret }),
      ...(clientKey ? { privateKey: clientKey.pem, privateKeyId: clientKey.publicJwk.kid } : {}),
    },
    ...(options.namedProviders === undefined
      ? {}
      : {
          providers: Object.fromEntries(
            Object.entries(named).map(([name, server]) => [name, { issuer: server.url, clientId: CLIENT_ID, clientSecret: `${clientSecret}-${name}` }]),
          ),
        }),
    upstream: upstream.url,
    session: { store: options.store ?? `sqlite://${join(dir, 'sessions.sqlite')}`, encryptionKeys: [randomBytes(32).toString('base64')] },
  };
  const extra = typeof options.config === 'function' ? options.config(as) : (options.config ?? {});
  const document = mergeSections(base, extra);
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger('debug', sink);
  if (options.asDownAtStart) asProxy.mode = 'down';
  const gateway = await startGateway(loadConfig(document, {}), { logger, cwd: dir, ...(options.clock ? { clock: options.clock } : {}) });
  return {
    gateway,
    url: publicUrl,
    as,
    asProxy,
    upstream,
    named,
    clientSecret,
    ...(clientKey ? { clientPrivateKey: clientKey.pem } : {}),
    get logs() {
      return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    logText: () => lines.join('\n'),
    dir,
    document,
    async close() {
      await gateway.shutdown();
      await upstream.close();
      await as.close();
      await Promise.all(Object.values(named).map((server) => server.close()));
      await asProxy.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A user's keyed pseudonym in this gateway's logs and spans (README "Observe"). */
export function pseudonymOf(h: Pick<Harness, 'document'>, userId: string): string {
  const keys = (h.document.session as { encryptionKeys: string[] }).encryptionKeys;
  return pseudonym(pseudonymKey(keys[0]!), userId);
}

/** A client key pair for `private_key_jwt`: the PKCS#8 PEM for the gateway, the public JWK (with a `kid`) for the AS. */
function clientKeyPair(type: 'ec' | 'rsa'): { pem: string; publicJwk: { kid: string } & Record<string, unknown> } {
  const { privateKey, publicKey } =
    type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
  return { pem, publicJwk: { ...publicKey.export({ format: 'jwk' }), kid: randomBytes(6).toString('hex'), use: 'sig' } };
}

/** Merges config sections one level deep (a section given replaces keys, not the whole section). */
export function mergeSections(
  base: Record<string, Record<string, unknown> | string>,
  extra: Record<string, unknown>,
): Record<string, Record<string, unknown> | string> {
  const merged = { ...base };
  for (const [section, value] of Object.entries(extra)) {
    const current = merged[section];
    merged[section] =
      typeof value === 'object' && value !== null && !Array.isArray(value) && typeof current === 'object'
        ? { ...current, ...(value as Record<string, unknown>) }
        : (value as string);
  }
  return merged;
}

/** A port that was free a moment ago (for a publicUrl that must be known before listening). */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
