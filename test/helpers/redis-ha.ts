import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createClient } from '@keyv/redis';
import { freePort } from './harness.js';
import { REDIS_SERVER } from './redis.js';

const run = promisify(execFile);

/** Debian's redis-sentinel and redis-cli; CI installs them (.ci/run). */
export const REDIS_SENTINEL = '/usr/bin/redis-sentinel';
export const REDIS_CLI = '/usr/bin/redis-cli';

/** Why the Sentinel and Cluster tests cannot run here, or false. On CI they always run. */
export const redisHaMissing: string | false =
  (existsSync(REDIS_SERVER) && existsSync(REDIS_SENTINEL) && existsSync(REDIS_CLI)) || process.env.CI === 'true'
    ? false
    : 'redis-server, redis-sentinel and redis-cli are needed (apt-get install redis-server redis-sentinel)';

/** A redis-server (or redis-sentinel) process on a free loopback port. */
export interface RedisProcess {
  port: number;
  /** SIGKILL: a crash, no shutdown save. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

async function spawnRedis(binary: string, args: string[], port: number): Promise<RedisProcess> {
  const child: ChildProcess = spawn(binary, args, { stdio: 'ignore' });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${binary} exited with ${child.exitCode}`);
    if ((await command(port, 'PING').catch(() => '')) === 'PONG') break;
    if (Date.now() > deadline) throw new Error(`${binary} on ${port} did not answer PING within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { port, kill: () => end('SIGKILL'), stop: () => end('SIGTERM') };
}

/** Runs one command with a short-lived node-redis client; its reply as node-redis parses it. */
export async function command(port: number, ...args: string[]): Promise<unknown> {
  const client = createClient({ socket: { host: '127.0.0.1', port, connectTimeout: 1000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await client.sendCommand(args);
  } finally {
    client.destroy();
  }
}

function serverArgs(port: number, dir: string, extra: string[] = []): string[] {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning', ...extra];
}

/** A master with one replica, watched by three sentinels (quorum 2). */
export interface SentinelSet {
  /** `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/gatehouse-master` */
  url: string;
  master: RedisProcess;
  replica: RedisProcess;
  sentinels: RedisProcess[];
  /** The port the sentinels currently name as the master's. */
  masterPort(): Promise<number>;
  /** Waits until the replica has every write the master acknowledged (WAIT 1). */
  replicated(): Promise<void>;
  close(): Promise<void>;
}

const MASTER_NAME = 'gatehouse-master';

/**
 * Starts redis-server as master, a second as its replica, and three
 * redis-sentinel processes (down-after 1 s, failover timeout 5 s), and
 * waits until every sentinel knows the replica and the other two sentinels,
 * so that killing the master leads to a failover.
 */
export async function startSentinelSet(): Promise<SentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-sentinel-'));
  const processes: RedisProcess[] = [];
  try {
    const masterPort = await freePort();
    mkdirSync(join(dir, 'master'));
    const master = await spawnRedis(REDIS_SERVER, serverArgs(masterPort, join(dir, 'master')), masterPort);
    processes.push(master);
    const replicaPort = await freePort();
    mkdirSync(join(dir, 'replica'));
    const replica = await spawnRedis(REDIS_SERVER, serverArgs(replicaPort, join(dir, 'replica'), ['--replicaof', '127.0.0.1', String(masterPort)]), replicaPort);
    processes.push(replica);
    const sentinels: RedisProcess[] = [];
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const file = join(dir, `sentinel-${i}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          'daemonize no',
          'loglevel warning',
          `dir ${dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
          `sentinel failover-timeout ${MASTER_NAME} 5000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      const sentinel = await spawnRedis(REDIS_SENTINEL, [file], port);
      processes.push(sentinel);
      sentinels.push(sentinel);
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await Promise.all(
        sentinels.map(async ({ port }) => {
          const replicas = (await command(port, 'SENTINEL', 'REPLICAS', MASTER_NAME).catch(() => [])) as unknown[];
          const peers = (await command(port, 'SENTINEL', 'SENTINELS', MASTER_NAME).catch(() => [])) as unknown[];
          return replicas.length === 1 && peers.length === 2;
        }),
      );
      if (ready.every(Boolean) && (await command(replicaPort, 'INFO', 'replication').then(String)).includes('master_link_status:up')) break;
      if (Date.now() > deadline) throw new Error('the sentinels did not discover the replica and each other within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return {
      url: `redis+sentinel://${sentinels.map(({ port }) => `127.0.0.1:${port}`).join(',')}/${MASTER_NAME}`,
      master,
      replica,
      sentinels,
      async masterPort() {
        for (const { port } of sentinels) {
          const address = (await command(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME).catch(() => undefined)) as string[] | undefined;
          if (address) return Number(address[1]);
        }
        throw new Error('no sentinel answered');
      },
      async replicated() {
        await command(masterPort, 'WAIT', '1', '5000');
      },
      async close() {
        for (const process of processes.reverse()) await process.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const process of processes.reverse()) await process.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A Redis Cluster of three masters (no replicas), made by `redis-cli --cluster create`. */
export interface RedisClusterNodes {
  /** `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3` */
  url: string;
  nodes: RedisProcess[];
  close(): Promise<void>;
}

export async function startRedisCluster(): Promise<RedisClusterNodes> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cluster-'));
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const nodeDir = join(dir, String(port));
      mkdirSync(nodeDir);
      nodes.push(
        await spawnRedis(
          REDIS_SERVER,
          serverArgs(port, nodeDir, ['--cluster-enabled', 'yes', '--cluster-config-file', join(nodeDir, 'nodes.conf'), '--cluster-node-timeout', '2000']),
          port,
        ),
      );
    }
    await run(REDIS_CLI, ['--cluster', 'create', ...nodes.map(({ port }) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const states = await Promise.all(nodes.map(async ({ port }) => String(await command(port, 'CLUSTER', 'INFO').catch(() => ''))));
      if (states.every((info) => info.includes('cluster_state:ok'))) break;
      if (Date.now() > deadline) throw new Error('the cluster did not reach cluster_state:ok within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return {
      url: `redis+cluster://${nodes.map(({ port }) => `127.0.0.1:${port}`).join(',')}`,
      nodes,
      async close() {
        for (const node of nodes) await node.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const node of nodes) await node.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
