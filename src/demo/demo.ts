import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { loadConfig, loadConfigFile, readConfigDocument } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { startGateway, type RunningGateway } from '../server.js';
import { startAuthorizationServer, type DemoClient } from './authorization-server.js';
import { startUpstream } from './upstream.js';

/** The demo's configuration file, shipped in the package. */
export const DEMO_CONFIG_FILE = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));
/** Access tokens of the demo live this long by default, so a refresh is seen within a minute. */
const DEMO_ACCESS_TOKEN_TTL = 60;
/** The demo config's `tokens.refreshSkew`, in seconds (config/demo.yaml). */
const DEMO_REFRESH_SKEW = 10;
/**
 * The demo authorization server's client, fixed and printed so that a config
 * of one's own can name it (README "Your own app in five minutes"). The
 * server listens on loopback only: the secret guards nothing else.
 */
export const DEMO_CLIENT_ID = 'gatehouse-demo';
const DEMO_CLIENT_SECRET = 'gatehouse-demo-secret';
const DEMO_AS_PORT = '8090';
const DEMO_EMAIL_DOMAIN = 'example.com';
/** A bare DNS name such as corp.test: letters, digits and dashes between dots, no @. */
const DOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/i;
/** Keys of the user's `provider` section that `demo --config` keeps: they say what the gateway does with a user, not where the provider is. */
const KEPT_PROVIDER_KEYS = ['userIdClaim', 'dpop'] as const;

export interface Demo {
  gateway: RunningGateway;
  /** The URL a browser opens: the config's `server.publicUrl`. */
  publicUrl: string;
  /** The demo upstream, the one given with `--upstream`, or none with `--config` (the config's routes decide). */
  upstreamUrl: string | undefined;
  /** Whether `upstreamUrl` is the user's own service. */
  ownUpstream: boolean;
  /** With `--config`: the file, whose routes run against the demo authorization server. */
  configFile: string | undefined;
  /** The configuration the gateway runs with. */
  config: Config;
  authorizationServer: { url: string; clientId: string; clientSecret: string };
  emailDomain: string;
  accessTokenTtl: number;
  /** Stops the gateway, the upstream and the authorization server. */
  stop(): Promise<void>;
}

/** Options of {@link startDemo} that come from the command line. */
export interface DemoOptions {
  /** `gatehouse demo --upstream URL`: put the demo's AS and gateway in front of this service instead of the demo upstream. */
  upstream?: string;
  /** `gatehouse demo --config FILE`: the gateway runs this config, its provider section replaced by the demo authorization server. */
  configFile?: string;
  /** `gatehouse demo --email-domain corp.test`: the domain of the demo users' email addresses (else GATEHOUSE_DEMO_EMAIL_DOMAIN, else example.com). */
  emailDomain?: string;
}

/** A demo port is taken: the message says which variable picks another. */
export class DemoPortInUseError extends Error {
  constructor(
    readonly port: string,
    readonly variable: string,
    hint = `set ${variable} to a free port (for example ${variable}=${Number(port) + 100 || 8180} npm run demo)`,
  ) {
    super(`port ${port} is already in use: ${hint}`);
    this.name = 'DemoPortInUseError';
  }
}

/** A demo setting from the command line or the environment cannot be used; the message names it and says what it must be. */
export class DemoSettingError extends Error {
  override readonly name = 'DemoSettingError';
}

/**
 * `gatehouse demo`: a local authorization server (oidc-provider with its
 * development login), a demo upstream that checks every bearer token (or the
 * user's own service, `options.upstream`), and the gateway between them, all
 * on loopback. With `options.configFile` the gateway runs that config
 * instead (its routes, upstreams and rules), with the demo authorization
 * server as its provider, and no demo upstream is started.
 *
 * Ports come from GATEHOUSE_DEMO_PORT (default 8080),
 * GATEHOUSE_DEMO_ADMIN_PORT (9091) and GATEHOUSE_DEMO_AS_PORT (8090, the
 * authorization server's); GATEHOUSE_DEMO_TOKEN_TTL (seconds, default 60)
 * sets the access tokens' lifetime, GATEHOUSE_DEMO_CLIENT_SECRET the
 * client's secret. Whatever fails to start, what did start is stopped again,
 * so the process can exit.
 * @throws ConfigError when `options.configFile` is not a valid config;
 *   DemoSettingError for a bad setting; DemoPortInUseError.
 */
export async function startDemo(env: NodeJS.ProcessEnv, logger: Logger, options: DemoOptions = {}): Promise<Demo> {
  if (options.upstream !== undefined && options.configFile !== undefined) {
    throw new DemoSettingError('--upstream and --config: give one of them (with --config, the routes of your config name the upstreams)');
  }
  const port = portSetting(env, 'GATEHOUSE_DEMO_PORT', '8080');
  const adminPort = portSetting(env, 'GATEHOUSE_DEMO_ADMIN_PORT', '9091');
  const asPort = portSetting(env, 'GATEHOUSE_DEMO_AS_PORT', DEMO_AS_PORT);
  const accessTokenTtl = tokenTtl(env.GATEHOUSE_DEMO_TOKEN_TTL);
  const emailDomain = emailDomainSetting(options.emailDomain, env.GATEHOUSE_DEMO_EMAIL_DOMAIN);
  const clientSecret = env.GATEHOUSE_DEMO_CLIENT_SECRET || DEMO_CLIENT_SECRET;
  const issuer = `http://127.0.0.1:${asPort}`;
  // Before anything starts: a config that cannot be used is refused with its problems, never replaced by the plain demo.
  const ownConfig = options.configFile === undefined ? undefined : configWithDemoProvider(options.configFile, env, { issuer, clientSecret });

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
      if (taken === asPort) throw new DemoPortInUseError(taken, 'GATEHOUSE_DEMO_AS_PORT');
      if (ownConfig !== undefined) throw new DemoPortInUseError(taken, 'server.port', `change server.port or admin.port in ${options.configFile}`);
      throw new DemoPortInUseError(taken, taken === adminPort ? 'GATEHOUSE_DEMO_ADMIN_PORT' : 'GATEHOUSE_DEMO_PORT');
    }
    throw err;
  }

  async function start(): Promise<Demo> {
    const publicUrl = ownConfig?.server.publicUrl.replace(/\/$/, '') ?? `http://127.0.0.1:${port}`;
    const paths = ownConfig?.paths ?? { callback: '/callback', signedOut: '/signed-out', backchannelLogout: '/backchannel-logout' };
    const client: DemoClient = {
      clientId: DEMO_CLIENT_ID,
      clientSecret,
      authMethod: 'client_secret_post',
      redirectUris: [`${publicUrl}${paths.callback}`],
      postLogoutRedirectUris: [`${publicUrl}/`, `${publicUrl}${paths.signedOut}`],
      backchannelLogoutUri: `${publicUrl}${paths.backchannelLogout}`,
    };
    const authorizationServer = await startAuthorizationServer({
      port: Number(asPort),
      clients: [client],
      accessTokenTtl,
      emailDomain,
      skipLogoutConfirmation: true,
    });
    stops.push(() => authorizationServer.close());
    let upstreamUrl = options.upstream;
    if (upstreamUrl === undefined && ownConfig === undefined) {
      const upstream = await startUpstream({
        introspectionEndpoint: `${authorizationServer.url}/token/introspection`,
        clientId: authorizationServer.introspection.clientId,
        clientSecret: authorizationServer.introspection.clientSecret,
        live: { refreshes: (sub) => authorizationServer.refreshesOf(sub), refreshSkew: DEMO_REFRESH_SKEW },
      });
      stops.push(() => upstream.close());
      upstreamUrl = upstream.url;
    }
    const config =
      ownConfig ??
      loadConfigFile(DEMO_CONFIG_FILE, {
        ...env,
        GATEHOUSE_DEMO_PORT: port,
        GATEHOUSE_DEMO_ADMIN_PORT: adminPort,
        GATEHOUSE_DEMO_ISSUER: authorizationServer.url,
        GATEHOUSE_DEMO_CLIENT_SECRET: clientSecret,
        GATEHOUSE_DEMO_UPSTREAM: upstreamUrl!,
        GATEHOUSE_DEMO_SESSION_KEY: randomBytes(32).toString('base64'),
      });
    const gateway = await startGateway(config, { logger, cwd: process.cwd() });
    stops.push(() => gateway.shutdown());
    return {
      gateway,
      publicUrl,
      upstreamUrl,
      ownUpstream: options.upstream !== undefined,
      configFile: options.configFile,
      config,
      authorizationServer: { url: authorizationServer.url, clientId: DEMO_CLIENT_ID, clientSecret },
      emailDomain,
      accessTokenTtl,
      stop: stopAll,
    };
  }
}

/**
 * The user's config with its `provider` section replaced by the demo
 * authorization server's (only `userIdClaim` and `dpop` are kept), loaded
 * and checked like any config. A config that names GATEHOUSE_SESSION_KEY
 * (the default of `session.encryptionKeys`) runs with a fresh random key
 * when that variable is not set: sessions then end with the demo.
 */
function configWithDemoProvider(file: string, env: NodeJS.ProcessEnv, demo: { issuer: string; clientSecret: string }): Config {
  const document = readConfigDocument(file);
  const written = isMapping(document) && isMapping(document.provider) ? document.provider : {};
  const kept = Object.fromEntries(KEPT_PROVIDER_KEYS.filter((key) => written[key] !== undefined).map((key) => [key, written[key]]));
  const provider = { ...kept, issuer: demo.issuer, clientId: DEMO_CLIENT_ID, clientSecret: demo.clientSecret, clientAuthMethod: 'client_secret_post' };
  const withDemoProvider = isMapping(document) ? { ...document, provider } : document;
  return loadConfig(withDemoProvider, { GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64'), ...env });
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function portSetting(env: NodeJS.ProcessEnv, variable: string, fallback: string): string {
  const raw = env[variable];
  if (raw === undefined || raw === '') return fallback;
  if (!/^[0-9]{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 65535) throw new DemoSettingError(`${variable}: must be a port number (1 to 65535), got "${raw}"`);
  return String(Number(raw));
}

function tokenTtl(raw: string | undefined): number {
  if (raw === undefined) return DEMO_ACCESS_TOKEN_TTL;
  const seconds = Number(raw);
  if (!/^[0-9]+$/.test(raw) || seconds < 2) throw new DemoSettingError(`GATEHOUSE_DEMO_TOKEN_TTL: must be a whole number of seconds, at least 2, got "${raw}"`);
  return seconds;
}

function emailDomainSetting(flag: string | undefined, variable: string | undefined): string {
  const [name, raw] = flag !== undefined ? ['--email-domain', flag] : ['GATEHOUSE_DEMO_EMAIL_DOMAIN', variable];
  if (raw === undefined || raw === '') return DEMO_EMAIL_DOMAIN;
  if (!DOMAIN.test(raw)) throw new DemoSettingError(`${name}: must be a domain such as corp.test (no @), got "${raw}"`);
  return raw.toLowerCase();
}

/** What the demo prints for a person: where to go, how to sign in, and what to put in a config of one's own. */
export function demoBanner(demo: Demo): string {
  const { authorizationServer: as } = demo;
  const lines = ['', demo.configFile === undefined ? 'gatehouse demo is running:' : `gatehouse demo is running ${demo.configFile}:`];
  lines.push(
    `  Open        ${demo.publicUrl}/`,
    `  Sign in as  any user name (for example alice), any password: alice is alice@${demo.emailDomain};`,
    '              a name with an @ (bob@corp.test) signs in as that address',
    `  Session     ${demo.publicUrl}${demo.config.paths.session}   Sign out  ${demo.publicUrl}${demo.config.paths.logout}`,
  );
  if (demo.configFile !== undefined) {
    for (const route of routesOf(demo.config)) lines.push(`  Route       ${route.path} -> ${route.upstream} (auth: ${route.auth})`);
    lines.push('  Provider    the demo authorization server below, in place of your config\'s provider section');
  } else {
    lines.push(
      `  Upstream    ${demo.upstreamUrl}${demo.ownUpstream ? ' (yours: it receives Authorization: Bearer <access token>)' : ' (the demo upstream: its page shows what it received)'}`,
    );
  }
  lines.push(
    `  Authorization server  issuer ${as.url}, client id ${as.clientId}, client secret ${as.clientSecret} (client_secret_post)`,
    `  Metrics     ${demo.gateway.adminAddress}/metrics`,
    `  Access tokens live ${demo.accessTokenTtl} s; the gateway refreshes them by itself. Ctrl+C stops the demo.`,
  );
  if (demo.configFile === undefined) lines.push('  Your own routes and rules: gatehouse demo --config FILE (README "Your own app in five minutes").');
  lines.push('');
  return lines.join('\n');
}

function routesOf(config: Config): Array<{ path: string; upstream: string; auth: string }> {
  return config.routes ?? [{ path: '/', upstream: config.upstream, auth: 'required' }];
}
