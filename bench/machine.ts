import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './root.js';

/** Where the numbers were taken: the machine and every version that matters. */
export interface Machine {
  /** The machine's cores, whatever this process is pinned to (`availableParallelism()` would say 1 under `taskset -c 1`). */
  nproc: number;
  cpuModel: string;
  memoryBytes: number;
  kernel: string;
  /** 1, 5 and 15 minute load averages when the bench started (other work on the machine skews the numbers). */
  loadAverageAtStart: number[];
  versions: Record<string, string>;
  /** Whether the servers were pinned to core 0 and the driver to core 1 with taskset. */
  pinned: boolean;
  command: string;
}

export function describeMachine(pinned: boolean, command: string): Machine {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  return {
    nproc: cpus().length,
    cpuModel: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown',
    memoryBytes: totalmem(),
    kernel: release(),
    loadAverageAtStart: loadavg().map((value) => Math.round(value * 100) / 100),
    versions: {
      node: process.version,
      gatehouse: packageVersion(ROOT),
      fastify: packageVersion(join(ROOT, 'node_modules', 'fastify')),
      '@fastify/http-proxy': packageVersion(join(ROOT, 'node_modules', '@fastify', 'http-proxy')),
      '@fastify/reply-from': packageVersion(join(ROOT, 'node_modules', '@fastify', 'reply-from')),
      undici: packageVersion(join(ROOT, 'node_modules', 'undici')),
      'oidc-provider': packageVersion(join(ROOT, 'node_modules', 'oidc-provider')),
      sqlite3: packageVersion(join(ROOT, 'node_modules', 'sqlite3')),
      autocannon: packageVersion(join(ROOT, 'node_modules', 'autocannon')),
    },
    pinned,
    command,
  };
}

function packageVersion(dir: string): string {
  try {
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}
