import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';

/** The core the gateway and the baseline run on; the driver, load and upstream take the other. */
export const SERVER_CORE = '0';
export const DRIVER_CORE = '1';
const CLOCK_TICKS_PER_SECOND = 100;

/** Whether `taskset` exists and this machine has at least two cores to split. */
export function canPin(): boolean {
  return spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' }).status === 0;
}

/** A child process the bench started and measures through /proc. */
export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  /** Resident set size now, bytes (VmRSS). */
  rss(): number;
  /** Peak resident set size since the last resetPeak(), bytes (VmHWM). */
  peakRss(): number;
  /** Starts a new peak RSS window (writes 5 to /proc/PID/clear_refs); false where the kernel refuses. */
  resetPeak(): boolean;
  /** CPU time (user + system) consumed so far by all threads, seconds. */
  cpuSeconds(): number;
  /** The same for the main (JavaScript) thread alone; the rest is GC helpers and the libuv pool (SQLite, crypto). */
  mainThreadCpuSeconds(): number;
  /** stderr so far (for failure messages). */
  stderr(): string;
  /** SIGTERM, then its exit (SIGKILL after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<void>;
}

export interface SpawnOptions {
  /** Run under `taskset -c CORE`. */
  core?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Where stdout goes: 'pipe' (read it with `firstLine`) or a file path (appended). */
  stdout?: 'pipe' | string;
  nodeFlags?: string[];
}

/** Spawns `node [flags] SCRIPT ARGS`, pinned to a core when asked. */
export function spawnNode(name: string, script: string, args: string[], options: SpawnOptions = {}): Child {
  const command = [process.execPath, ...(options.nodeFlags ?? []), script, ...args];
  const pinned = options.core === undefined ? command : ['taskset', '-c', options.core, ...command];
  const out = options.stdout === undefined || options.stdout === 'pipe' ? 'pipe' : openSync(options.stdout, 'a');
  const child = spawn(pinned[0]!, pinned.slice(1), { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', out, 'pipe'] });
  if (typeof out === 'number') closeSync(out);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    if (stderr.length < 64 * 1024) stderr += chunk.toString('utf8');
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (child.pid === undefined) throw new Error(`${name}: could not start ${pinned.join(' ')}`);
  const pid = child.pid;
  return {
    name,
    process: child,
    pid,
    rss: () => statusField(pid, 'VmRSS'),
    peakRss: () => statusField(pid, 'VmHWM'),
    resetPeak: () => {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, '5');
        return true;
      } catch {
        return false;
      }
    },
    cpuSeconds: () => cpuSeconds(`/proc/${pid}/stat`),
    mainThreadCpuSeconds: () => cpuSeconds(`/proc/${pid}/task/${pid}/stat`),
    stderr: () => stderr,
    async stop(timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** The first stdout line of a child, parsed as JSON (the bench's own servers print `{"port":N}`). */
export function firstLine<T>(child: Child, timeoutMs = 20_000): Promise<T> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`${child.name}: no output within ${timeoutMs} ms; stderr: ${child.stderr()}`)), timeoutMs);
    child.process.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const end = text.indexOf('\n');
      if (end < 0) return;
      clearTimeout(timer);
      resolve(JSON.parse(text.slice(0, end)) as T);
    });
    child.process.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${child.name} exited (${code}) before it was ready; stderr: ${child.stderr()}`));
    });
  });
}

/** Polls `url` until it answers anything at all (the gateway at LOG_LEVEL=warn logs no "listening" line). */
export async function waitUntilAnswering(url: string, child: Child, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`${child.name} exited (${child.process.exitCode}); stderr: ${child.stderr()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`${child.name} did not answer at ${url} within ${timeoutMs} ms; stderr: ${child.stderr()}`);
      await sleep(50);
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function statusField(pid: number, field: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(match[1]) * 1024;
}

function cpuSeconds(statFile: string): number {
  const stat = readFileSync(statFile, 'utf8');
  // Fields after the command name (which may hold spaces) start at ") ": utime is field 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}
