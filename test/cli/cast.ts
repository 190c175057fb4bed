import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAuthorizationServer, type AuthorizationServer } from '../../src/demo/authorization-server.js';
import { startUpstream, type Upstream } from '../../src/demo/upstream.js';
import { CLIENT_ID, freePort } from '../helpers/harness.js';

/** A real AS and upstream in the test process, and a config file for a gateway started through the CLI. */
export interface Cast {
  as: AuthorizationServer;
  upstream: Upstream;
  /** Public URL the gateway must listen on (its port was free a moment ago). */
  publicUrl: string;
  /** The gateway's working directory (the relative sqlite path resolves here); removed by close(). */
  dir: string;
  configFile: string;
  /** The environment the config file references (client secret, session key). */
  env: Record<string, string>;
  close(): Promise<void>;
}

export interface CastOptions {
  accessTokenTtl?: number;
  /** Extra YAML appended under `server:` (indented keys), e.g. `  shutdownGrace: 3s\n`. */
  serverYaml?: string;
}

/**
 * Starts the AS and the upstream for a gateway at a reserved loopback port
 * and writes its config: relative `sqlite://data/sessions.sqlite`, secrets
 * through `${GATEHOUSE_CLIENT_SECRET}` and `[${GATEHOUSE_SESSION_KEY}]`.
 */
export async function startCast(options: CastOptions = {}): Promise<Cast> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-'));
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  const as = await startAuthorizationServer({
    clients: [{ clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: [`${publicUrl}/callback`], postLogoutRedirectUris: [`${publicUrl}/`] }],
    accessTokenTtl: options.accessTokenTtl ?? 60,
  });
  const upstream = await startUpstream({
    introspectionEndpoint: `${as.listenUrl}/token/introspection`,
    clientId: as.introspection.clientId,
    clientSecret: as.introspection.clientSecret,
  });
  const configFile = join(dir, 'gatehouse.yaml');
  writeFileSync(
    configFile,
    `server:
  host: 127.0.0.1
  port: ${port}
  publicUrl: ${publicUrl}
${options.serverYaml ?? ''}admin:
  host: 127.0.0.1
  port: 0
provider:
  issuer: ${as.url}
  clientId: ${CLIENT_ID}
  clientSecret: \${GATEHOUSE_CLIENT_SECRET}
upstream: ${upstream.url}
session:
  store: sqlite://data/sessions.sqlite
  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]
`,
  );
  return {
    as,
    upstream,
    publicUrl,
    dir,
    configFile,
    env: { GATEHOUSE_CLIENT_SECRET: clientSecret, GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64') },
    async close() {
      await upstream.close();
      await as.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
