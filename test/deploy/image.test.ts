import t from 'tap';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { startUpstream } from '../../src/demo/upstream.js';
import { CLIENT_ID, freePort } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { ensureBuilt, ROOT } from '../helpers/cli-process.js';
import { allowedByDockerignore, layOutImage, readDockerfile, withoutTestRunner, type ImageLayout } from './dockerfile.js';

/**
 * Issue 7 part 3: the container image, reproduced without a Docker engine.
 * The Dockerfile's final stage is laid out under a temporary root (its COPY
 * lines as written; node_modules from a real `npm ci --omit=dev`, which
 * compiles sqlite3), then its ENTRYPOINT is started the way the image runs
 * it: ENV as given, WORKDIR as cwd, as the USER (uid 10001) when the tests
 * run as root, with only the VOLUME writable.
 */

// npm ci --omit=dev compiles sqlite3: a minute or two on a busy 2-core machine.
t.setTimeout(600_000);

const base = mkdtempSync(join(tmpdir(), 'gatehouse-image-'));
chmodSync(base, 0o755); // the image's user must reach the root laid out inside
t.teardown(() => rmSync(base, { recursive: true, force: true }));
const dockerfile = readDockerfile(ROOT);
const asRoot = process.getuid?.() === 0;
let image: ImageLayout;

t.before(async () => {
  ensureBuilt();
  image = await layOutImage(dockerfile, { context: ROOT, depsRoot: join(base, 'deps'), root: join(base, 'image') });
});

t.test('the image runs as uid 10001 from exec-form ENTRYPOINT node /app/dist/cli.js, exposing 8080 and 9091, with /data as its volume', async (t) => {
  t.same(image.user, { uid: 10001, gid: 10001 });
  t.strictSame(image.entrypoint, ['node', join(image.root, 'app/dist/cli.js')], 'no shell in between: node is PID 1 and gets SIGTERM');
  t.strictSame(image.volumes, [join(image.root, 'data')]);
  t.equal(image.workdir, join(image.root, 'data'), 'relative paths of the config resolve on the volume');
  t.match(dockerfile, /^EXPOSE 8080 9091$/m);
  t.equal(image.env.GATEHOUSE_CONFIG, '/etc/gatehouse/gatehouse.yaml');
});

t.test('.dockerignore admits every file the Dockerfile copies from the context, and none of the host state', async (t) => {
  const dockerignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
  t.ok(image.contextSources.length >= 5);
  for (const source of image.contextSources) t.ok(allowedByDockerignore(dockerignore, source), `${source} is in the context`);
  for (const hostState of ['node_modules/fastify/package.json', 'dist/cli.js', '.git/HEAD', 'data/gatehouse.sqlite', '.env', 'test/proxy/smoke.test.ts', 'helm/gatehouse/values.yaml']) {
    t.notOk(allowedByDockerignore(dockerignore, hostState), `${hostState} stays out`);
  }
});

t.test('the final image holds the production dependencies, sqlite3 compiled, and no development dependency', async (t) => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: object; devDependencies: object };
  const modules = join(image.root, 'app/node_modules');
  for (const name of Object.keys(pkg.dependencies)) t.ok(existsSync(join(modules, name, 'package.json')), `${name} installed`);
  for (const name of Object.keys(pkg.devDependencies)) t.notOk(existsSync(join(modules, name)), `${name} (dev) absent`);
  t.notOk(existsSync(join(modules, 'oidc-provider')), 'oidc-provider, which only `gatehouse demo` imports, is not in the image');
  t.ok(existsSync(join(modules, 'sqlite3/build/Release/node_sqlite3.node')), 'the sqlite3 binding was built');
  t.notOk(existsSync(join(modules, 'aws-cdk-lib')), 'the helm test tooling stays out');
  t.ok(existsSync(join(image.root, 'app/package.json')), 'package.json ("type": "module") is copied');
  t.ok(existsSync(join(image.root, 'app/config/demo.yaml')), 'config/ is copied');
});

t.test('started as the image starts it, it serves a login and proxies a signed-in request, writes only to /data, and exits 0 on SIGTERM', async (t) => {
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  const as = await startAuthorizationServer({
    clients: [{ clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: [`${publicUrl}/callback`] }],
  });
  t.teardown(() => as.close());
  const upstream = await startUpstream({
    introspectionEndpoint: `${as.listenUrl}/token/introspection`,
    clientId: as.introspection.clientId,
    clientSecret: as.introspection.clientSecret,
  });
  t.teardown(() => upstream.close());

  // Where the image looks for its config (ENV GATEHOUSE_CONFIG), as a mounted file would be.
  const configFile = join(image.root, image.env.GATEHOUSE_CONFIG!);
  mkdirSync(dirname(configFile), { recursive: true });
  // No session.store: the default, sqlite://./data/gatehouse.sqlite, must land on the volume.
  writeFileSync(
    configFile,
    `server: {host: 127.0.0.1, port: ${port}, publicUrl: '${publicUrl}', shutdownGrace: 2s}
admin: {host: 127.0.0.1, port: 0}
provider: {issuer: '${as.url}', clientId: ${CLIENT_ID}, clientSecret: '\${GATEHOUSE_CLIENT_SECRET}'}
upstream: '${upstream.url}'
session: {encryptionKeys: ['\${GATEHOUSE_SESSION_KEY}']}
`,
  );
  const before = snapshot(image.root, image.volumes);
  const env = Object.fromEntries(Object.entries(image.env).map(([name, value]) => [name, value.startsWith('/') ? join(image.root, value) : value]));
  const [command, ...args] = image.entrypoint;
  t.equal(command, 'node');
  if (!asRoot) t.comment('not root: the gateway runs as the current user instead of uid 10001');
  const child = spawn(...withoutTestRunner(process.execPath, args), {
    cwd: image.workdir,
    env: { ...env, PATH: process.env.PATH, GATEHOUSE_CLIENT_SECRET: clientSecret, GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64') },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(asRoot && image.user ? { uid: image.user.uid, gid: image.user.gid } : {}),
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      if (stdout.includes(`"address":"${publicUrl}"`)) resolve();
    });
    void exited.then(() => reject(new Error(`the gateway exited before listening; stdout: ${stdout}; stderr: ${stderr}`)));
  });

  const metadata = (await (await fetch(`${as.url}/.well-known/openid-configuration`)).json()) as { authorization_endpoint: string };
  const login = await fetch(`${publicUrl}/login`, { redirect: 'manual' });
  t.equal(login.status, 302);
  t.ok(login.headers.get('location')!.startsWith(`${metadata.authorization_endpoint}?`), 'GET /login redirects to the AS');

  const { cookie } = await signIn(publicUrl, { user: 'alice' });
  const me = await fetch(`${publicUrl}/api/me`, { headers: { cookie } });
  t.equal(me.status, 200, 'the session stored in SQLite on the volume is served');
  t.equal(((await me.json()) as { sub: string }).sub, 'alice');

  child.kill('SIGTERM');
  t.strictSame(await exited, { code: 0, signal: null }, 'SIGTERM: graceful stop, exit 0');
  t.match(stdout, /"msg":"stopped"/);
  t.equal(stderr, '', 'nothing on stderr');

  const database = join(image.workdir, 'data/gatehouse.sqlite');
  t.ok(existsSync(database), 'the default store is on the volume');
  if (asRoot) t.equal(statSync(database).uid, 10001, 'written by the image user');
  t.strictSame(snapshot(image.root, image.volumes), before, 'nothing outside the volume was created or changed');
});

/** Every path under `root` outside `excluded`, with its size and modification time. */
function snapshot(root: string, excluded: string[]): string[] {
  const entries: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (excluded.includes(path)) continue;
      const stat = statSync(path, { throwIfNoEntry: false });
      entries.push(`${relative(root, path)} ${stat?.size ?? '-'} ${stat?.mtimeMs ?? '-'}`);
      if (entry.isDirectory()) walk(path);
    }
  };
  walk(root);
  return entries.sort();
}
