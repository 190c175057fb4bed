import t from 'tap';
import { Agent, get, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBuilt, listeningAddress, runCli, spawnCli } from '../helpers/cli-process.js';
import { startCast } from './cast.js';
import { signIn } from '../helpers/sign-in.js';

/** README "Run it" through the real entry point: listening lines, LOG_LEVEL, graceful SIGTERM. */

t.before(ensureBuilt);
const LARGE = 64 * 1024 * 1024;

t.test('once listening it logs JSON lines with the public and admin addresses; SIGTERM ends it with exit code 0', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());
  const gateway = spawnCli([], { ...cast.env, GATEHOUSE_CONFIG: cast.configFile }, cast.dir);
  t.teardown(() => gateway.stop());

  const listening = await gateway.waitForLog((line) => line.msg === 'listening');
  t.equal(listening.address, cast.publicUrl, 'address is http://HOST:PORT of the public listener');
  t.equal(listening.level, 30, 'at info level');
  const admin = await listeningAddress(gateway, 'admin listening');
  t.match(admin, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.equal((await fetch(`${admin}/healthz`)).status, 200);
  t.equal((await fetch(`${cast.publicUrl}/session`)).status, 401, 'the public listener answers');
  t.strictSame(
    gateway.logs.filter((line) => 'unparsed' in line),
    [],
    'every stdout line is JSON',
  );

  gateway.child.kill('SIGTERM');
  const exit = await gateway.exited;
  t.strictSame(exit, { code: 0, signal: null });
  t.ok(gateway.logs.some((line) => line.msg === 'stopped'), 'it logged its stop');
  await t.rejects(fetch(`${cast.publicUrl}/session`), 'nothing listens any more');
  t.equal(gateway.stderr(), '');
});

t.test('LOG_LEVEL=warn suppresses info lines', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());
  // The AS is closed first, so discovery fails: a warn line that must still be written.
  await cast.as.close();
  const gateway = spawnCli(['--config', cast.configFile], { ...cast.env, LOG_LEVEL: 'warn' }, cast.dir);
  t.teardown(() => gateway.stop());
  await gateway.waitForLog((line) => line.msg === 'provider discovery failed');
  await untilAnswers(`${cast.publicUrl}/session`);
  t.equal((await fetch(`${cast.publicUrl}/login`, { redirect: 'manual' })).status, 503);
  t.strictSame(await gateway.stop(), { code: 0, signal: null });
  t.ok(gateway.logs.length > 0);
  t.strictSame(
    gateway.logs.filter((line) => typeof line.level !== 'number' || line.level < 40),
    [],
    'no info line (listening, request completed, stopped)',
  );
});

t.test('SIGTERM lets an in-flight slow request finish, refuses new connections, then exits 0', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());
  const gateway = spawnCli(['--config', cast.configFile], cast.env, cast.dir);
  t.teardown(() => gateway.stop());
  const admin = await listeningAddress(gateway, 'admin listening');
  const { cookie } = await signIn(cast.publicUrl, { user: 'alice' });

  // A slow consumer on a keep-alive connection, as browsers use: headers
  // arrive, then the body is not read until after SIGTERM.
  const agent = new Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    get(`${cast.publicUrl}/api/large?bytes=${LARGE}`, { headers: { cookie }, agent }, resolve).on('error', reject);
  });
  t.equal(response.statusCode, 200);
  response.pause();

  gateway.child.kill('SIGTERM');
  await gateway.waitForLog((line) => line.msg === 'shutting down');
  t.equal((await fetch(`${admin}/readyz`)).status, 503, 'readiness is false while shutting down');
  await t.rejects(fetch(`${cast.publicUrl}/session`), 'new connections are refused');
  t.equal(gateway.child.exitCode, null, 'the process waits for the request');

  let received = 0;
  response.on('data', (chunk: Buffer) => (received += chunk.length));
  response.resume();
  await once(response, 'end');
  t.equal(received, LARGE, 'the whole body arrived');
  const started = Date.now();
  t.strictSame(await gateway.exited, { code: 0, signal: null });
  t.ok(Date.now() - started < 5000, 'it exits once the request is done, without holding the idle keep-alive connection for the 10 s grace');
});

t.test('a SIGTERM while start-up still waits for the AS ends the process with exit code 0', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());
  // An "AS" that accepts connections and never answers: discovery waits for provider.timeout.
  const sockets = new Set<Socket>();
  const silent = createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const { port } = silent.address() as { port: number };
  const config = join(cast.dir, 'silent-as.yaml');
  writeFileSync(
    config,
    `server:\n  host: 127.0.0.1\n  port: 0\n  publicUrl: ${cast.publicUrl}\nadmin:\n  port: 0\nprovider:\n  issuer: http://127.0.0.1:${port}\n  clientId: gatehouse\n  clientSecret: s\n  timeout: 1s\nsession:\n  store: memory://\n  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]\n`,
  );
  const gateway = spawnCli(['--config', config], cast.env, cast.dir);
  t.teardown(() => gateway.stop());
  await once(silent, 'connection');
  t.notOk(gateway.logs.some((line) => line.msg === 'listening'), 'still starting');
  gateway.child.kill('SIGTERM');
  t.strictSame(await gateway.exited, { code: 0, signal: null });
  t.ok(gateway.logs.some((line) => line.msg === 'stopped'), 'it stopped through the graceful path');
});

t.test('a port already in use ends the process with exit code 1 instead of leaving the other listener open', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const { port } = taken.address() as { port: number };
  const config = join(cast.dir, 'admin-port-taken.yaml');
  writeFileSync(config, readFileSync(cast.configFile, 'utf8').replace('admin:\n  host: 127.0.0.1\n  port: 0', `admin:\n  host: 127.0.0.1\n  port: ${port}`));
  const result = await runCli(['--config', config], cast.env, cast.dir, 10_000);
  t.equal(result.code, 1);
  t.match(result.stderr, /EADDRINUSE/);
  t.match(result.stdout, /"msg":"listening"/, 'the public listener had opened, and was closed again');
});

async function untilAnswers(url: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    try {
      await (await fetch(url)).arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`${url} did not answer`);
}
