import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { startGateway, type RunningGateway } from '../server.js';
import { startAuthorizationServer } from './authorization-server.js';
import { startUpstream } from './upstream.js';

/** The demo's configuration file, shipped in the package. */
export const DEMO_CONFIG_FILE = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));
/** Access tokens of the demo live this long, so a refresh is seen within a minute. */
const DEMO_ACCESS_TOKEN_TTL = 60;

export interface Demo {
  gateway: RunningGateway;
  /** Stops the gateway, the upstream and the authorization server. */
  stop(): Promise<void>;
}

/**
 * `gatehouse demo`: a local authorization server (oidc-provider with its
 * development login), a demo upstream that checks every bearer token, and the
 * gateway between them, all on loopback. Ports come from
 * GATEHOUSE_DEMO_PORT (default 8080) and GATEHOUSE_DEMO_ADMIN_PORT (9091).
 */
export async function startDemo(env: NodeJS.ProcessEnv, logger: Logger): Promise<Demo> {
  const port = env.GATEHOUSE_DEMO_PORT ?? '8080';
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const authorizationServer = await startAuthorizationServer({
    clients: [
      {
        clientId: 'gatehouse-demo',
        clientSecret,
        authMethod: 'client_secret_post',
        redirectUris: [`${publicUrl}/callback`],
        postLogoutRedirectUris: [`${publicUrl}/`],
        backchannelLogoutUri: `${publicUrl}/backchannel-logout`,
      },
    ],
    accessTokenTtl: DEMO_ACCESS_TOKEN_TTL,
  });
  const upstream = await startUpstream({
    introspectionEndpoint: `${authorizationServer.url}/token/introspection`,
    clientId: authorizationServer.introspection.clientId,
    clientSecret: authorizationServer.introspection.clientSecret,
  });
  const config = loadConfigFile(DEMO_CONFIG_FILE, {
    ...env,
    GATEHOUSE_DEMO_PORT: port,
    GATEHOUSE_DEMO_ADMIN_PORT: env.GATEHOUSE_DEMO_ADMIN_PORT ?? '9091',
    GATEHOUSE_DEMO_ISSUER: authorizationServer.url,
    GATEHOUSE_DEMO_CLIENT_SECRET: clientSecret,
    GATEHOUSE_DEMO_UPSTREAM: upstream.url,
    GATEHOUSE_DEMO_SESSION_KEY: randomBytes(32).toString('base64'),
  });
  const gateway = await startGateway(config, { logger, cwd: process.cwd() });
  return {
    gateway,
    async stop() {
      await gateway.shutdown();
      await upstream.close();
      await authorizationServer.close();
    },
  };
}

/** What the demo prints for a person: where to go and how to sign in. */
export function demoBanner(demo: Demo): string {
  return [
    '',
    'gatehouse demo is running:',
    `  Open        ${demo.gateway.address}/`,
    '  Sign in as  any user name (for example alice), any password',
    `  Session     ${demo.gateway.address}/session   Sign out  ${demo.gateway.address}/logout`,
    `  Metrics     ${demo.gateway.adminAddress}/metrics`,
    `  Access tokens live ${DEMO_ACCESS_TOKEN_TTL} s; the gateway refreshes them by itself. Ctrl+C stops the demo.`,
    '',
  ].join('\n');
}
