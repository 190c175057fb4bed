import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './harness.js';

/** Debian's redis-server; CI installs it (.ci/run). */
export const REDIS_SERVER = '/usr/bin/redis-server';

/**
 * Why the Redis tests cannot run here, or false when they can. On CI they
 * always run (.ci/run installs redis-server), so a missing server fails there.
 */
export const redisMissing: string | false =
  existsSync(REDIS_SERVER) || process.env.CI === 'true' ? false : `${REDIS_SERVER} is not installed (apt-get install redis-server)`;

/** A real redis-server on a free loopback port, without persistence, in a temp dir. */
export interface RedisServer {
  /** `redis://127.0.0.1:PORT/0` */
  url: string;
  port: number;
  /** Stops the server (SIGTERM, waits for exit); its data is lost. */
  stop(): Promise<void>;
  /** Starts it again on the same port: empty, unless started `persistent`. */
  start(): Promise<void>;
  /** Runs one command over a fresh connection and returns the raw RESP reply (for simple replies: `+OK`, `:3`). */
  command(...args: string[]): Promise<string>;
  /** Stops it for good and removes its directory. */
  close(): Promise<void>;
}

/**
 * Starts redis-server with `--save '' --appendonly no` (a restart loses
 * everything, as README "Run several replicas (Redis)" describes), or with an fsync'ed append-only file
 * when `persistent`; no unix socket, bound to 127.0.0.1.
 *
 * @example
 * const redis = await startRedis();
 * const h = await startHarness({ store: redis.url });
 */
export async function startRedis(options: { persistent?: boolean; args?: string[] } = {}): Promise<RedisServer> {
  // With persistence every write is in the append-only file before Redis answers, so a restart keeps it.
  const persistence = options.persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const server = spawn(
      REDIS_SERVER,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence, '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning', ...(options.args ?? [])],
      { stdio: 'ignore' },
    );
    child = server;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (server.exitCode !== null) throw new Error(`redis-server exited with ${server.exitCode}`);
      if ((await command('PING').catch(() => '')) === '+PONG') return;
      if (Date.now() > deadline) throw new Error('redis-server did not answer PING within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async function stop(): Promise<void> {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGTERM');
    await exited;
  }

  function command(...args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
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
  }

  await start();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    start,
    stop,
    command,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
