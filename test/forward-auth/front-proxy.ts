import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The recipes the README quotes; the tests run them as they are, with only addresses and ports put in. */
export const RECIPES = fileURLToPath(new URL('../../docs/forward-auth/', import.meta.url));

export const NGINX = '/usr/sbin/nginx';
export const CADDY = '/usr/bin/caddy';

/** Why a proxy's tests cannot run here, or false. On CI they always run (.ci/run installs nginx and caddy). */
export function proxyMissing(binary: string, debianPackage: string): string | false {
  return existsSync(binary) || process.env.CI === 'true' ? false : `${binary} is not installed (apt-get install ${debianPackage})`;
}

/** A reverse proxy started by a test, on loopback, from its own config file in a temp dir. */
export interface FrontProxy {
  /** `http://127.0.0.1:PORT`: the site as the browser sees it. */
  url: string;
  /** Its error output, for a failed assertion's message. */
  log(): string;
  close(): Promise<void>;
}

/** Where the recipe's gatehouse (127.0.0.1:8080) and application (127.0.0.1:3000) really are, and the port to listen on. */
export interface Addresses {
  port: number;
  /** `http://127.0.0.1:PORT` of the gateway. */
  gateway: string;
  /** `http://127.0.0.1:PORT` of the application. */
  upstream: string;
}

/** A recipe file with the example addresses replaced by the test's. */
function recipe(name: string, addresses: Addresses, listen: [string, string]): string {
  const text = readFileSync(join(RECIPES, name), 'utf8');
  for (const example of ['127.0.0.1:8080', '127.0.0.1:3000', listen[0]]) {
    if (!text.includes(example)) throw new Error(`${name} no longer holds ${example}: update the test with the recipe`);
  }
  return text
    .replaceAll('127.0.0.1:8080', new URL(addresses.gateway).host)
    .replaceAll('127.0.0.1:3000', new URL(addresses.upstream).host)
    .replace(listen[0], listen[1]);
}

/**
 * nginx with docs/forward-auth/nginx.conf as its only server, in the
 * foreground, its pid, logs and temp files in `dir` (never the system's).
 */
export async function startNginx(dir: string, addresses: Addresses): Promise<FrontProxy> {
  const root = join(dir, 'nginx');
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, 'gatehouse.conf'), recipe('nginx.conf', addresses, ['listen 80;', `listen 127.0.0.1:${addresses.port};`]));
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `${kind}_temp_path ${join(root, kind)};`).join('\n  ');
  writeFileSync(
    join(root, 'nginx.conf'),
    `pid ${join(root, 'nginx.pid')};
error_log ${join(root, 'error.log')} warn;
worker_processes 1;
events { worker_connections 256; }
http {
  ${temp}
  access_log off;
  include ${join(root, 'gatehouse.conf')};
}
`,
  );
  return startProcess(NGINX, ['-p', root, '-c', join(root, 'nginx.conf'), '-e', join(root, 'error.log'), '-g', 'daemon off;'], addresses.port, {}, () =>
    existsSync(join(root, 'error.log')) ? readFileSync(join(root, 'error.log'), 'utf8') : '',
  );
}

/** Caddy with docs/forward-auth/Caddyfile, admin API and automatic HTTPS off as the file says, its data in `dir`. */
export async function startCaddy(dir: string, addresses: Addresses): Promise<FrontProxy> {
  const root = join(dir, 'caddy');
  mkdirSync(root, { recursive: true });
  const file = join(root, 'Caddyfile');
  writeFileSync(file, recipe('Caddyfile', addresses, [':80 {', `:${addresses.port} {\n\tbind 127.0.0.1`]));
  const env = { HOME: root, XDG_DATA_HOME: join(root, 'data'), XDG_CONFIG_HOME: join(root, 'config') };
  return startProcess(CADDY, ['run', '--config', file, '--adapter', 'caddyfile'], addresses.port, env);
}

async function startProcess(
  binary: string,
  args: string[],
  port: number,
  env: Record<string, string>,
  errorLog?: () => string,
): Promise<FrontProxy> {
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const log = () => `${output}${errorLog?.() ?? ''}`;
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null) throw new Error(`${binary} exited with ${child.exitCode}:\n${log()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${binary} did not listen on ${port} within 10 s:\n${log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
