import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { startUpstream } from '../../src/demo/upstream.js';
import { CLIENT_ID, freePort } from '../helpers/harness.js';
import { ensureBuilt, listeningAddress, spawnCli } from '../helpers/cli-process.js';
import { makeTestCa, type TestCa } from '../helpers/test-ca.js';
import { REDIS_SERVER, redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * README "Run several replicas (Redis)": `rediss://` is Redis over TLS, and
 * the server's certificate must be one the gateway trusts. A real
 * redis-server with TLS only (`--port 0 --tls-port`), its certificate from
 * a CA made at test time: the gateway (its own process) refuses it without
 * the CA and works with it in NODE_EXTRA_CA_CERTS.
 */

ensureBuilt();
t.setTimeout(120_000);

/**
 * Why this test cannot run here, or false. A redis-server built without TLS
 * refuses `--tls-port` ("FATAL CONFIG FILE ERROR"); one with TLS, given no
 * port at all, exits saying it is "configured to not listen anywhere". On
 * CI it always runs.
 */
function tlsMissing(): string | false {
  if (redisMissing) return redisMissing;
  if (process.env.CI === 'true') return false;
  const probe = spawnSync(REDIS_SERVER, ['--port', '0', '--tls-port', '0', '--save', '', '--appendonly', 'no'], { timeout: 5000, encoding: 'utf8' });
  return /FATAL CONFIG FILE ERROR[\s\S]*tls/i.test(`${probe.stdout}${probe.stderr}`) ? `this redis-server has no TLS support (${REDIS_SERVER} --tls-port refused)` : false;
}

interface TlsRedis {
  port: number;
  /** One command over a TLS connection that trusts the CA; the raw RESP reply. */
  command(...args: string[]): Promise<string>;
}

/** redis-server listening only on TLS. */
async function startTlsRedis(t: Test, ca: TestCa): Promise<TlsRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-rediss-'));
  const port = await freePort();
  let stderr = '';
  const child: ChildProcess = spawn(
    REDIS_SERVER,
    ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--tls-cert-file', ca.certFile, '--tls-key-file', ca.keyFile, '--tls-ca-cert-file', ca.caFile, '--tls-auth-clients', 'no', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  t.teardown(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const command = (...args: string[]) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ca: ca.ca, servername: 'localhost' });
      let reply = '';
      socket.setTimeout(5000, () => socket.destroy(new Error('redis command timed out')));
      socket.on('error', reject);
      socket.on('data', (chunk) => {
        reply += chunk.toString('utf8');
        if (reply.endsWith('\r\n')) {
          socket.end();
          resolve(reply.trimEnd());
        }
      });
      socket.write(`*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`);
    });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}: ${stderr}`);
    if ((await command('PING').catch(() => '')) === '+PONG') return { port, command };
    if (Date.now() > deadline) throw new Error(`redis-server with TLS did not answer PING within 10 s: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

t.test('rediss:// against redis-server with TLS: refused without the CA, sessions work with it', { skip: tlsMissing() }, async (t) => {
  const ca = makeTestCa();
  t.teardown(() => ca.close());
  const redis = await startTlsRedis(t, ca);
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  const as = await startAuthorizationServer({
    clients: [{ clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: [`${publicUrl}/callback`], postLogoutRedirectUris: [`${publicUrl}/`] }],
    accessTokenTtl: 60,
  });
  const upstream = await startUpstream({ introspectionEndpoint: `${as.listenUrl}/token/introspection`, ...as.introspection });
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-rediss-gw-'));
  t.teardown(async () => {
    await upstream.close();
    await as.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const configFile = join(dir, 'gatehouse.yaml');
  writeFileSync(
    configFile,
    `server:\n  host: 127.0.0.1\n  port: ${port}\n  publicUrl: ${publicUrl}\n  shutdownGrace: 1s\nadmin:\n  host: 127.0.0.1\n  port: 0\nprovider:\n  issuer: ${as.url}\n  clientId: ${CLIENT_ID}\n  clientSecret: \${GATEHOUSE_CLIENT_SECRET}\nupstream: ${upstream.url}\nsession:\n  store: rediss://127.0.0.1:${redis.port}/0\n  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]\n`,
  );
  const env = { GATEHOUSE_CLIENT_SECRET: clientSecret, GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64') };
  const processed = async () => Number(/total_commands_processed:(\d+)/.exec(await redis.command('INFO', 'stats'))![1]);

  await t.test('without the CA', async (t) => {
    const before = await processed();
    const gateway = spawnCli(['--config', configFile], env, dir);
    t.teardown(() => gateway.stop());
    await listeningAddress(gateway, 'listening');
    const admin = await listeningAddress(gateway, 'admin listening');
    await waitFor('not ready', async () => (await fetch(`${admin}/readyz`)).status === 503, 10_000);
    t.pass('not ready: the store never answered');
    const session = await fetch(`${publicUrl}/session`, { headers: { cookie: `session_id=${randomBytes(32).toString('base64url')}`, accept: 'application/json' } });
    t.equal(session.status, 503, 'a request that needs the store: 503');
    t.match(await session.json(), { error: 'store_unavailable' });
    const line = await gateway.waitForLog((log) => log.msg === 'store unavailable');
    t.match(line, { code: 'GH_ERR_STORE_UNAVAILABLE', failure: { endpoint: `rediss://127.0.0.1:${redis.port}/0` } }, 'logged with the store address');
    const connection = await gateway.waitForLog((log) => log.msg === 'store connection failed');
    t.match(connection, { level: 40, failure: { code: /CERT|ISSUER|SIGNATURE/, endpoint: `rediss://127.0.0.1:${redis.port}/0` } }, `the log names the certificate problem: ${JSON.stringify(connection.failure)}`);
    t.equal(gateway.logs.filter((log) => log.msg === 'store connection failed').length, 1, 'once, not once per reconnect attempt');
    // Only this test's own INFO commands reached Redis: the gateway never got past the handshake.
    t.equal((await processed()) - before, 1, 'no command from the gateway reached Redis');
  });

  await t.test('with the CA in NODE_EXTRA_CA_CERTS', async (t) => {
    const gateway = spawnCli(['--config', configFile], { ...env, NODE_EXTRA_CA_CERTS: ca.caFile }, dir);
    t.teardown(() => gateway.stop());
    await listeningAddress(gateway, 'listening');
    const admin = await listeningAddress(gateway, 'admin listening');
    await waitFor('readiness', async () => (await fetch(`${admin}/readyz`)).status === 200, 15_000);
    t.pass('ready');
    const { cookie } = await signIn(publicUrl, { user: 'over-tls' });
    const session = await fetch(`${publicUrl}/session`, { headers: { cookie } });
    t.equal(session.status, 200, 'signed in');
    t.match(await session.json(), { user: { sub: 'over-tls' } });
    t.equal((await fetch(`${publicUrl}/api/me`, { headers: { cookie } })).status, 200, 'a signed-in request passes');
    const keys = await redis.command('KEYS', 'gatehouse:*');
    t.match(keys, /gatehouse:s:/, 'the session is in Redis, written over TLS');
    t.notOk(gateway.logs.some((log) => log.msg === 'store unavailable'), 'no store failure');
  });
});
