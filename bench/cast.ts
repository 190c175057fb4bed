import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAuthorizationServer, type AuthorizationServer } from '../src/demo/authorization-server.js';
import { freePort } from '../test/helpers/harness.js';
import { unboundedMemoryAdapter } from './memory-adapter.js';
import { ROOT } from './root.js';
import { APACHE_REDIRECT_PATH } from './apache-server.js';
import { firstLine, spawnNode, SERVER_CORE, waitUntilAnswering, type Child } from './processes.js';

/** The repository root (this file runs as dist-bench/bench/cast.js). */
export { ROOT };
/** The gateway's entry point; GATEHOUSE_BENCH_CLI runs another build (a before/after comparison of a change). */
export const CLI = process.env.GATEHOUSE_BENCH_CLI ?? join(ROOT, 'dist', 'cli.js');
const BENCH_DIST = fileURLToPath(new URL('./', import.meta.url));

/**
 * The node flags `npm start` runs the gateway with (package.json's `start`,
 * `node FLAGS dist/cli.js`; the Dockerfile's entry point has the same, and
 * test/deploy keeps them in step): every gateway of the bench runs with them
 * unless a scenario gives `nodeFlags`. GATEHOUSE_BENCH_NODE_FLAGS overrides them.
 */
export const GATEWAY_NODE_FLAGS: string[] = (
  process.env.GATEHOUSE_BENCH_NODE_FLAGS ??
  /^node\s+(.*?)\s*dist\/cli\.js$/.exec((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start)?.[1] ??
  ''
)
  .split(/\s+/)
  .filter(Boolean);
export const CLIENT_ID = 'gatehouse-bench';
export const APACHE_CLIENT_ID = 'apache-bench';

/** Every server of the bench: AS in this process, upstream and baseline as children, gateways started on demand. */
export interface Cast {
  as: AuthorizationServer;
  /** Access-token lifetimes the AS gives now, seconds: at sign-in and at a refresh. Scenarios change them. */
  ttl: { login: number; refreshed: number };
  upstream: Child;
  upstreamUrl: string;
  baseline: Child;
  baselineUrl: string;
  /** The session key every gateway of this cast uses (so the bench can seal records for it). */
  sessionKey: string;
  dir: string;
  /** Whether servers are pinned to SERVER_CORE. */
  pinned: boolean;
  /** The port and client registered at the AS for Apache + mod_auth_openidc (bench/apache-server.ts). */
  apache: { port: number; clientId: string; clientSecret: string };
  startGateway(options: GatewayOptions): Promise<Gateway>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** A name for its directory and messages. */
  name: string;
  /** Absolute path of the sqlite file; default a fresh one in the gateway's directory. */
  sqlitePath?: string;
  cacheSize?: number;
  /** tokens.refreshSkew, seconds (default: the gateway's default). */
  refreshSkew?: number;
  /** LOG_LEVEL (default warn). */
  logLevel?: 'warn' | 'info';
  /** Where the gateway's stdout (its log) goes: `gateway.log` in its directory (default), or a pipe the driver reads (`Gateway.logLines`). */
  logTo?: 'file' | 'pipe';
  /** Node flags (default GATEWAY_NODE_FLAGS, those of `npm start`); a scenario that adds some (--cpu-prof) adds them to GATEWAY_NODE_FLAGS. */
  nodeFlags?: string[];
  /** Entry point of the build to run (default CLI). */
  cli?: string;
  /** provider.dpop: DPoP-bound tokens, a proof per proxied request. */
  dpop?: boolean;
  /** `routes` instead of `upstream`: this many routes, all to the upstream, the most specific one `ROUTED_PATH`. */
  routes?: number;
  /** `sites` beside `upstream`: this many sites `s1.localhost` ... `sN.localhost`, each with one route to the upstream (README "Several sites"). */
  sites?: number;
  /** A `websocket: true` route at `WEBSOCKET_PATH` to this upstream, beside `/` to the bench upstream. */
  websocketUpstream?: string;
  /** A route at `TARGET_PATH` with a token target (`BENCH_RESOURCE`), beside `/` with the sign-in token (README "A token for each API"). */
  tokenTarget?: boolean;
  /** A route at `ASSERTION_PATH` with an identity assertion (README "Identity assertion"), beside `/` without one. */
  assertion?: boolean;
  /** A machine-client JWT issuer (its URL; discovery and JWKS there): `/` then accepts `[session, bearer]` (README "Machine clients"). */
  bearerIssuer?: string;
}

/** The path of the assertion route (`GatewayOptions.assertion`). */
export const ASSERTION_PATH = '/api/asserted';

/** The path of the token-target route (`GatewayOptions.tokenTarget`). */
export const TARGET_PATH = '/api/target';
/** The resource indicator the bench AS issues audience-restricted tokens for. */
export const BENCH_RESOURCE = 'https://bench-api.example.com';

/** The path of the WebSocket route (`GatewayOptions.websocketUpstream`). */
export const WEBSOCKET_PATH = '/ws';

/** The path the routes scenario requests: the longest of its routes matches it. */
export const ROUTED_PATH = '/api/data';

/** A gateway started through its real entry point, `node dist/cli.js --config FILE`. */
export interface Gateway {
  child: Child;
  url: string;
  /** The admin listener (GET /metrics). */
  adminUrl: string;
  dir: string;
  /** What it has logged so far (the file, or the first 256 KiB the pipe delivered). */
  logText(): string;
  /** Access-log lines (`"request completed"`) written so far. */
  accessLogLines(): number;
  stop(): Promise<void>;
}

/** Gateways that may run at once (a pair of two configurations, the access log's three): each has its own registered port. */
const GATEWAY_SLOTS = 3;

export async function startCast(options: { pinned: boolean }): Promise<Cast> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  const core = options.pinned ? SERVER_CORE : undefined;
  const ports: number[] = [];
  for (let slot = 0; slot < GATEWAY_SLOTS; slot += 1) ports.push(await freePort());
  const clientSecret = randomBytes(24).toString('base64url');
  const sessionKey = randomBytes(32).toString('base64');
  const ttl = { login: 3600, refreshed: 3600 };
  const apache = { port: await freePort(), clientId: APACHE_CLIENT_ID, clientSecret: randomBytes(24).toString('base64url') };
  const as = await startAuthorizationServer({
    clients: [
      { clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: ports.map((port) => `http://127.0.0.1:${port}/callback`) },
      {
        clientId: apache.clientId,
        clientSecret: apache.clientSecret,
        authMethod: 'client_secret_post',
        redirectUris: [`http://127.0.0.1:${apache.port}${APACHE_REDIRECT_PATH}`],
      },
    ],
    accessTokenTtl: (ctx) => (ctx.oidc.params?.grant_type === 'refresh_token' ? ttl.refreshed : ttl.login),
    // The token-target scenario's resource (RFC 8707): its tokens come from refresh grants, so they live ttl.refreshed.
    resourceServers: { [BENCH_RESOURCE]: { scopes: ['bench.read'] } },
    // A thousand sign-ins outgrow oidc-provider's default store (about 1,000 objects): their grants would be dropped.
    adapter: unboundedMemoryAdapter(),
  });
  // The upstream shares the driver's core with the load generator (it is not what is measured).
  const upstream = spawnNode('upstream', join(BENCH_DIST, 'upstream.js'), []);
  const upstreamUrl = `http://127.0.0.1:${(await firstLine<{ port: number }>(upstream)).port}`;
  const { child: baseline, url: baselineUrl } = await startBaseline(upstreamUrl, core);
  /** The gateway running on each slot's port. */
  const running: Array<Gateway | undefined> = ports.map(() => undefined);

  async function startGateway(gateway: GatewayOptions): Promise<Gateway> {
    const slot = running.indexOf(undefined);
    if (slot < 0) throw new Error(`${GATEWAY_SLOTS} gateways are running already: stop one first (each slot has its registered port)`);
    const port = ports[slot]!;
    const publicUrl = `http://127.0.0.1:${port}`;
    const gatewayDir = join(dir, gateway.name);
    mkdirSync(gatewayDir, { recursive: true });
    const configFile = join(gatewayDir, 'gatehouse.yaml');
    const adminPort = await freePort();
    writeFileSync(configFile, configYaml({ port, adminPort, publicUrl, issuer: as.url, upstreamUrl, ...gateway }));
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LOG_LEVEL: gateway.logLevel ?? 'warn',
      GATEHOUSE_CLIENT_SECRET: clientSecret,
      GATEHOUSE_SESSION_KEY: sessionKey,
    };
    const child = spawnNode(`gateway ${gateway.name}`, gateway.cli ?? CLI, ['--config', configFile], {
      core,
      env,
      cwd: gatewayDir,
      stdout: gateway.logTo === 'pipe' ? 'pipe' : join(gatewayDir, 'gateway.log'),
      nodeFlags: gateway.nodeFlags ?? GATEWAY_NODE_FLAGS,
    });
    // A log shipper's end of the pipe: it reads every line as it comes (the first 256 KiB kept, access-log lines counted).
    let piped = '';
    let pipedTail = '';
    let pipedCompleted = 0;
    if (gateway.logTo === 'pipe') {
      child.process.stdout!.setEncoding('utf8');
      child.process.stdout!.on('data', (chunk: string) => {
        if (piped.length < 256 * 1024) piped += chunk;
        const text = pipedTail + chunk;
        for (let at = text.indexOf(COMPLETED); at >= 0; at = text.indexOf(COMPLETED, at + COMPLETED.length)) pipedCompleted += 1;
        pipedTail = text.slice(-(COMPLETED.length - 1));
      });
    }
    const started: Gateway = {
      child,
      url: publicUrl,
      adminUrl: `http://127.0.0.1:${adminPort}`,
      dir: gatewayDir,
      logText: () => (gateway.logTo === 'pipe' ? piped : readFileSync(join(gatewayDir, 'gateway.log'), 'utf8')),
      accessLogLines: () => (gateway.logTo === 'pipe' ? pipedCompleted : countOf(readFileSync(join(gatewayDir, 'gateway.log'), 'utf8'), COMPLETED)),
      async stop() {
        await child.stop();
        if (running[slot] === started) running[slot] = undefined;
      },
    };
    running[slot] = started;
    try {
      await waitUntilAnswering(`${publicUrl}/session`, child);
    } catch (err) {
      await started.stop();
      throw err;
    }
    return started;
  }

  return {
    as,
    ttl,
    upstream,
    upstreamUrl,
    baseline,
    baselineUrl,
    sessionKey,
    dir,
    pinned: options.pinned,
    apache,
    startGateway,
    async close() {
      for (const gateway of running) await gateway?.stop();
      await baseline.stop();
      await upstream.stop();
      await as.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const COMPLETED = '"request completed"';

function countOf(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) count += 1;
  return count;
}

/** Seconds the gateway has spent in garbage collection so far, from its own /metrics (prom-client's nodejs_gc_duration_seconds). */
export async function gcSeconds(gateway: Gateway): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) if (line.startsWith('nodejs_gc_duration_seconds_sum')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

/** Starts the bare proxy (bench/baseline-proxy.ts) in front of `upstreamUrl`. */
export async function startBaseline(upstreamUrl: string, core: string | undefined, nodeFlags: string[] = []): Promise<{ child: Child; url: string }> {
  const child = spawnNode('baseline proxy', join(BENCH_DIST, 'baseline-proxy.js'), [upstreamUrl], { core, nodeFlags });
  return { child, url: `http://127.0.0.1:${(await firstLine<{ port: number }>(child)).port}` };
}

function configYaml(o: GatewayOptions & { port: number; adminPort: number; publicUrl: string; issuer: string; upstreamUrl: string }): string {
  return `server:
  host: 127.0.0.1
  port: ${o.port}
  publicUrl: ${o.publicUrl}
  shutdownGrace: 2s
admin:
  host: 127.0.0.1
  port: ${o.adminPort}
provider:
  issuer: ${o.issuer}
  clientId: ${CLIENT_ID}
  clientSecret: \${GATEHOUSE_CLIENT_SECRET}
  clientAuthMethod: client_secret_post
${o.dpop ? '  dpop: true\n' : ''}${upstreamYaml(o)}
session:
  store: ${o.sqlitePath === undefined ? 'sqlite://data/sessions.sqlite' : `sqlite://${o.sqlitePath}`}
  cacheSize: ${o.cacheSize ?? 10000}
  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]
# The bench signs a thousand users in from one address: the sign-in rate limit would refuse most.
rateLimit:
  max: 0
# The hot path at 200 connections and the refresh storm (1,000 at once) are one user's requests:
# the per-user limit (README "Limits under abuse") would answer most with 429.
limits:
  perUserConcurrency: 0
${o.refreshSkew === undefined ? '' : `tokens:\n  refreshSkew: ${o.refreshSkew}\n`}`;
}

function upstreamYaml(o: GatewayOptions & { upstreamUrl: string }): string {
  if (o.bearerIssuer !== undefined) {
    return `machineClients:\n  issuers:\n    - {issuer: '${o.bearerIssuer}', audiences: [gatehouse]}\nroutes:\n  - {path: /, upstream: '${o.upstreamUrl}', accept: [session, bearer]}`;
  }
  if (o.websocketUpstream !== undefined) {
    return `routes:\n  - {path: ${WEBSOCKET_PATH}, upstream: '${o.websocketUpstream}', websocket: true}\n  - {path: /, upstream: '${o.upstreamUrl}'}`;
  }
  if (o.assertion) {
    // One Ed25519 key, made for this run; the route strips its prefix so both routes reach the same upstream path.
    const pem = (generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }) as string).trim().split('\n');
    return `routes:\n  - {path: ${ASSERTION_PATH}, upstream: '${o.upstreamUrl}', stripPrefix: true, assertion: {claims: [email]}}\n  - {path: /, upstream: '${o.upstreamUrl}'}\nassertion:\n  signingKeys:\n    - |\n${pem.map((line) => `      ${line}`).join('\n')}`;
  }
  if (o.tokenTarget) {
    return `routes:\n  - {path: ${TARGET_PATH}, upstream: '${o.upstreamUrl}', stripPrefix: true, token: {resource: '${BENCH_RESOURCE}', scopes: [bench.read]}}\n  - {path: /, upstream: '${o.upstreamUrl}'}`;
  }
  const upstream = o.routes === undefined ? `upstream: ${o.upstreamUrl}` : routesYaml(o.routes, o.upstreamUrl);
  return o.sites === undefined ? upstream : `${upstream}\n${sitesYaml(o.sites, o.upstreamUrl)}`;
}

/** `count` sites `s1.localhost` ... on the gateway's port, each with `/` to `upstreamUrl`. */
function sitesYaml(count: number, upstreamUrl: string): string {
  const sites = Array.from({ length: count }, (_, index) => `  - {host: s${index + 1}.localhost, routes: [{path: /, upstream: '${upstreamUrl}'}]}`);
  return `sites:\n${sites.join('\n')}`;
}

/** `count` routes to `upstreamUrl`: `/`, `/api`, `ROUTED_PATH`, and siblings that do not match it (`/r3`, `/api/r4`, ...). */
function routesYaml(count: number, upstreamUrl: string): string {
  const paths = ['/', '/api', ROUTED_PATH];
  for (let index = paths.length; index < count; index += 1) paths.push(index % 2 === 0 ? `/r${index}` : `/api/r${index}`);
  return `routes:\n${paths.map((path) => `  - {path: ${path}, upstream: '${upstreamUrl}', headers: {X-User: sub}}`).join('\n')}`;
}
