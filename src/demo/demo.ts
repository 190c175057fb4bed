import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { startGateway, type RunningGateway } from '../server.js';
import { startAuthorizationServer } from './authorization-server.js';
import { startUpstream } from './upstream.js';

/** The demo's configuration file, shipped in the package. */
export const DEMO_CONFIG_FILE = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));
/** Access tokens of the demo live this long by default, so a refresh is seen within a minute. */
const DEMO_ACCESS_TOKEN_TTL = 60;
/** The demo config's `tokens.refreshSkew`, in seconds (config/demo.yaml). */
const DEMO_REFRESH_SKEW = 10;

export interface Demo {
  gateway: RunningGateway;
  /** The service behind the gateway: the demo upstream, or the one given with `--upstream`. */
  upstreamUrl: string;
  /** Whether `upstreamUrl` is the user's own service. */
  ownUpstream: boolean;
  accessTokenTtl: number;
  /** Stops the gateway, the upstream and the authorization server. */
  stop(): Promise<void>;
}

/** Options of {@link startDemo} that come from the command line. */
export interface DemoOptions {
  /** `gatehouse demo --upstream URL`: put the demo's AS and gateway in front of this service instead of the demo upstream. */
  upstream?: string;
}

/** A demo port is taken: the message says which variable picks another. */
export class DemoPortInUseError extends Error {
  constructor(
    readonly port: string,
    readonly variable: string,
  ) {
    super(`port ${port} is already in use: set ${variable} to a free port (for example ${variable}=${Number(port) + 100 || 8180} npm run demo)`);
    this.name = 'DemoPortInUseError';
  }
}

/**
 * `gatehouse demo`: a local authorization server (oidc-provider with its
 * development login), a demo upstream that checks every bearer token (or the
 * user's own service, `options.upstream`), and the gateway between them, all
 * on loopback. Ports come from GATEHOUSE_DEMO_PORT (default 8080) and
 * GATEHOUSE_DEMO_ADMIN_PORT (9091); GATEHOUSE_DEMO_TOKEN_TTL (seconds,
 * default 60) sets the access tokens' lifetime. Whatever fails to start,
 * what did start is stopped again, so the process can exit.
 */
export async function startDemo(env: NodeJS.ProcessEnv, logger: Logger, options: DemoOptions = {}): Promise<Demo> {
  const port = env.GATEHOUSE_DEMO_PORT ?? '8080';
  const adminPort = env.GATEHOUSE_DEMO_ADMIN_PORT ?? '9091';
  const accessTokenTtl = tokenTtl(env.GATEHOUSE_DEMO_TOKEN_TTL);
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop();
  };
  try {
    return await start();
  } catch (err) {
    await stopAll();
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      const taken = String((err as { port?: number }).port ?? port);
      throw new DemoPortInUseError(taken, taken === adminPort ? 'GATEHOUSE_DEMO_ADMIN_PORT' : 'GATEHOUSE_DEMO_PORT');
    }
    throw err;
  }

  async function start(): Promise<Demo> {
    const authorizationServer = await startAuthorizationServer({
      clients: [
        {
          clientId: 'gatehouse-demo',
          clientSecret,
          authMethod: 'client_secret_post',
          redirectUris: [`${publicUrl}/callback`],
          postLogoutRedirectUris: [`${publicUrl}/`, `${publicUrl}/signed-out`],
          backchannelLogoutUri: `${publicUrl}/backchannel-logout`,
        },
      ],
      accessTokenTtl,
      skipLogoutConfirmation: true,
    });
    stops.push(() => authorizationServer.close());
    let upstreamUrl = options.upstream;
    if (upstreamUrl === undefined) {
      const upstream = await startUpstream({
        introspectionEndpoint: `${authorizationServer.url}/token/introspection`,
        clientId: authorizationServer.introspection.clientId,
        clientSecret: authorizationServer.introspection.clientSecret,
        live: { refreshes: (sub) => authorizationServer.refreshesOf(sub), refreshSkew: DEMO_REFRESH_SKEW },
      });
      stops.push(() => upstream.close());
      upstreamUrl = upstream.url;
    }
    const config = loadConfigFile(DEMO_CONFIG_FILE, {
      ...env,
      GATEHOUSE_DEMO_PORT: port,
      GATEHOUSE_DEMO_ADMIN_PORT: adminPort,
      GATEHOUSE_DEMO_ISSUER: authorizationServer.url,
      GATEHOUSE_DEMO_CLIENT_SECRET: clientSecret,
      GATEHOUSE_DEMO_UPSTREAM: upstreamUrl,
      GATEHOUSE_DEMO_SESSION_KEY: randomBytes(32).toString('base64'),
    });
    const gateway = await startGateway(config, { logger, cwd: process.cwd() });
    stops.push(() => gateway.shutdown());
    return { gateway, upstreamUrl, ownUpstream: options.upstream !== undefined, accessTokenTtl, stop: stopAll };
  }
}

function tokenTtl(raw: string | undefined): number {
  if (raw === undefined) return DEMO_ACCESS_TOKEN_TTL;
  const seconds = Number(raw);
  if (!/^[0-9]+$/.test(raw) || seconds < 2) throw new Error(`GATEHOUSE_DEMO_TOKEN_TTL: must be a whole number of seconds, at least 2, got "${raw}"`);
  return seconds;
}

/** What the demo prints for a person: where to go and how to sign in. */
export function demoBanner(demo: Demo): string {
  return [
    '',
    'gatehouse demo is running:',
    `  Open        ${demo.gateway.address}/`,
    '  Sign in as  any user name (for example alice), any password',
    `  Session     ${demo.gateway.address}/session   Sign out  ${demo.gateway.address}/logout`,
    `  Upstream    ${demo.upstreamUrl}${demo.ownUpstream ? ' (yours: it receives Authorization: Bearer <access token>)' : ' (the demo upstream: its page shows what it received)'}`,
    `  Metrics     ${demo.gateway.adminAddress}/metrics`,
    `  Access tokens live ${demo.accessTokenTtl} s; the gateway refreshes them by itself. Ctrl+C stops the demo.`,
    '',
  ].join('\n');
}
