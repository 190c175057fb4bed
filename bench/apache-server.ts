import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Child } from './processes.js';

export const APACHE_BINARY = '/usr/sbin/apache2';
const MODULES = '/usr/lib/apache2/modules';
export const APACHE_OIDC_MODULE = `${MODULES}/mod_auth_openidc.so`;
const CLOCK_TICKS_PER_SECOND = 100;

export function apacheInstalled(): boolean {
  return existsSync(APACHE_BINARY) && existsSync(APACHE_OIDC_MODULE);
}

export interface ApacheOptions {
  dir: string;
  port: number;
  issuer: string;
  clientId: string;
  clientSecret: string;
  upstreamUrl: string;
  /** Run under `taskset -c CORE`. */
  core?: string;
}

/** Where mod_auth_openidc takes the authorization server's answer (its OIDCRedirectURI). */
export const APACHE_REDIRECT_PATH = '/redirect_uri';

/**
 * Apache httpd with mod_auth_openidc as a gateway, the second baseline of
 * the bench: the authorization code flow with PKCE against the same
 * authorization server, sessions in its server-side shared-memory cache
 * (only a session id in the cookie, like gatehouse), the access token sent
 * upstream as `Authorization: Bearer` and claims passed to nobody. One child
 * process (event MPM, 64 threads) so that, pinned, it gets one core as the
 * gateway does. Its Child sums the CPU and RSS of the parent and its worker.
 */
export async function startApache(options: ApacheOptions): Promise<Child & { url: string }> {
  mkdirSync(options.dir, { recursive: true });
  // The worker runs as www-data and writes its shared-memory and lock files here.
  chmodSync(options.dir, 0o777);
  const url = `http://127.0.0.1:${options.port}`;
  const configFile = join(options.dir, 'httpd.conf');
  writeFileSync(configFile, configText(options, url));
  const command = [APACHE_BINARY, '-f', configFile, '-DFOREGROUND'];
  const pinned = options.core === undefined ? command : ['taskset', '-c', options.core, ...command];
  const child = spawn(pinned[0]!, pinned.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    if (stderr.length < 64 * 1024) stderr += chunk.toString('utf8');
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (child.pid === undefined) throw new Error(`apache: could not start ${pinned.join(' ')}`);
  const pid = child.pid;
  const tree = () => [pid, ...childrenOf(pid)];
  const started: Child & { url: string } = {
    name: 'apache + mod_auth_openidc',
    url,
    process: child,
    pid,
    rss: () => tree().reduce((sum, each) => sum + statusField(each, 'VmRSS'), 0),
    peakRss: () => tree().reduce((sum, each) => sum + statusField(each, 'VmHWM'), 0),
    resetPeak: () => false,
    cpuSeconds: () => tree().reduce((sum, each) => sum + cpuSeconds(each), 0),
    mainThreadCpuSeconds: () => tree().reduce((sum, each) => sum + cpuSeconds(each), 0),
    stderr: () => `${stderr}${readErrorLog(options.dir)}`,
    async stop(timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // SIGWINCH is httpd's graceful stop; SIGTERM stops at once, which is what a bench wants.
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(killer);
    },
  };
  await waitForPort(url, started);
  return started;
}

function configText(o: ApacheOptions, url: string): string {
  const modules = ['mpm_event', 'authn_core', 'authz_core', 'authz_user', 'headers', 'proxy', 'proxy_http', 'socache_shmcb', 'auth_openidc'];
  return `${modules.map((name) => `LoadModule ${name}_module ${MODULES}/mod_${name}.so`).join('\n')}
ServerRoot ${o.dir}
ServerName 127.0.0.1
Listen 127.0.0.1:${o.port}
PidFile ${o.dir}/httpd.pid
ErrorLog ${o.dir}/error.log
LogLevel warn auth_openidc:info
User www-data
Group www-data
Mutex file:${o.dir} default
DefaultRuntimeDir ${o.dir}
StartServers 1
ServerLimit 1
MinSpareThreads 1
MaxSpareThreads 64
ThreadsPerChild 64
MaxRequestWorkers 64
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60

OIDCProviderMetadataURL ${o.issuer}/.well-known/openid-configuration
OIDCClientID ${o.clientId}
OIDCClientSecret ${o.clientSecret}
OIDCProviderTokenEndpointAuth client_secret_post
OIDCRedirectURI ${url}${APACHE_REDIRECT_PATH}
OIDCCryptoPassphrase ${randomBytes(24).toString('base64url')}
OIDCScope "openid profile email offline_access"
OIDCPKCEMethod S256
OIDCSessionType server-cache
OIDCCacheType shm
OIDCCacheShmMax 50000
OIDCSSLValidateServer Off
OIDCPassClaimsAs none
OIDCPassIDTokenAs serialized
OIDCPassRefreshToken Off
OIDCRefreshAccessTokenBeforeExpiry 30
OIDCSessionInactivityTimeout 86400
OIDCSessionMaxDuration 86400

ProxyPass ${APACHE_REDIRECT_PATH} !
ProxyPass / ${o.upstreamUrl}/ keepalive=On
<Location />
  AuthType openid-connect
  Require valid-user
  RequestHeader set Authorization "Bearer %{OIDC_access_token}e" env=OIDC_access_token
</Location>
`;
}

async function waitForPort(url: string, child: Child, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`apache exited (${child.process.exitCode}): ${child.stderr()}`);
    try {
      await (await fetch(`${url}/`, { redirect: 'manual', signal: AbortSignal.timeout(1000) })).arrayBuffer();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`apache did not answer at ${url} within ${timeoutMs} ms: ${child.stderr()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) children.push(Number(entry));
    } catch {
      // The process ended while the list was read.
    }
  }
  return children;
}

function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

function statusField(pid: number, field: string): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

function readErrorLog(dir: string): string {
  try {
    return readFileSync(join(dir, 'error.log'), 'utf8').slice(-4000);
  } catch {
    return '';
  }
}
