import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { freePort } from '../helpers/harness.js';
import { ROOT, ensureBuilt } from '../helpers/cli-process.js';

/**
 * README "Install": the package `npm pack` makes installs into an empty
 * folder with its production dependencies only, and runs there: `npx
 * gatehouse --version`, `check`, a real start that becomes ready against a
 * real authorization server, and `gatehouse demo` saying how to get
 * oidc-provider, a devDependency it does not ship.
 *
 * Dependencies come through npm from its cache (--prefer-offline). Install
 * scripts are skipped and sqlite3's native binding is copied from this
 * checkout (same machine, same Node.js), so the test compiles nothing.
 */
t.setTimeout(900_000);

function run(command: string, args: string[], cwd: string, timeoutMs = 600_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: timeoutMs, env: npmEnvironment() }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** PATH and HOME, and what lets npm reach the registry from this machine (a CA bundle, a proxy), nothing else of this process's environment. */
function npmEnvironment(): NodeJS.ProcessEnv {
  const passed = ['PATH', 'HOME', 'NODE_EXTRA_CA_CERTS', 'HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY', 'https_proxy', 'http_proxy', 'no_proxy'];
  return Object.fromEntries(passed.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]]));
}

t.test('npm pack: the tarball installs in an empty folder and runs', async (t) => {
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-pack-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pack = await run('npm', ['pack', '--pack-destination', dir, '--silent'], ROOT);
  t.equal(pack.code, 0, pack.stderr);
  const tarball = readdirSync(dir).find((name) => name.endsWith('.tgz'));
  t.ok(tarball, `a tarball: ${tarball}`);
  const app = join(dir, 'app');
  cpSync(join(ROOT, 'test/cli/pack-fixture'), app, { recursive: true });
  const install = await run('npm', ['install', '--prefer-offline', '--ignore-scripts', '--omit=dev', '--no-audit', '--no-fund', join(dir, tarball!)], app);
  t.equal(install.code, 0, install.stderr);
  t.notOk(existsSync(join(app, 'node_modules/oidc-provider')), 'oidc-provider is not installed: a devDependency');
  t.notOk(existsSync(join(app, 'node_modules/gatehouse/src')), 'no TypeScript sources in the package');
  cpSync(join(ROOT, 'node_modules/sqlite3/build'), join(app, 'node_modules/sqlite3/build'), { recursive: true });

  const version = await run('npx', ['--no-install', 'gatehouse', '--version'], app);
  t.equal(version.code, 0, version.stderr);
  const { version: packaged } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  t.equal(version.stdout.trim(), packaged, 'the version of the package that was packed');

  const port = await freePort();
  const as = await startAuthorizationServer({ clients: [{ clientId: 'packed', clientSecret: 'packed-secret', redirectUris: [`http://127.0.0.1:${port}/callback`] }] });
  t.teardown(() => as.close());
  const adminPort = await freePort();
  writeFileSync(
    join(app, 'gatehouse.yaml'),
    `server: {host: 127.0.0.1, port: ${port}, publicUrl: "http://127.0.0.1:${port}", shutdownGrace: 1s}
admin: {host: 127.0.0.1, port: ${adminPort}}
provider: {issuer: "${as.url}", clientId: packed, clientSecret: packed-secret}
upstream: http://127.0.0.1:9
session: {store: "sqlite://./data/sessions.sqlite", encryptionKeys: ["${randomBytes(32).toString('base64')}"]}
`,
  );
  const check = await run('npx', ['--no-install', 'gatehouse', 'check', '--config', 'gatehouse.yaml'], app);
  t.equal(check.code, 0, check.stderr);
  t.match(check.stdout, 'clientSecret: "[redacted]"');

  const child = execFile('node', ['node_modules/gatehouse/dist/cli.js', '--config', 'gatehouse.yaml'], { cwd: app, env: { PATH: process.env.PATH } });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.teardown(() => child.kill('SIGKILL'));
  let ready = 0;
  const started = Date.now();
  while (ready !== 200 && Date.now() - started < 30_000) {
    ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then((response) => response.status, () => 0);
    if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  t.equal(ready, 200, 'the packed gateway started and became ready against the real AS');
  const login = await fetch(`http://127.0.0.1:${port}/login`, { redirect: 'manual' });
  t.equal(login.status, 302, '/login answers with a redirect to the AS');
  t.match(login.headers.get('location'), `${as.url}/`);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM: exit 0');

  const demo = await run('npx', ['--no-install', 'gatehouse', 'demo'], app, 30_000);
  t.equal(demo.code, 1);
  t.match(demo.stderr, 'gatehouse demo needs oidc-provider, a development dependency that a production install leaves out.');
});
