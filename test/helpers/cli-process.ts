import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository root, where `dist/cli.js` lives. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = `${ROOT}dist/cli.js`;

/**
 * `npm test` builds before tap runs; a single file run with `npx tap` may
 * find no build at all, and then builds once (a stale build is not detected).
 */
export function ensureBuilt(): void {
  if (!existsSync(CLI)) execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });
}

/** A minimal environment, so nothing from the shell running the tests (LOG_LEVEL, GATEHOUSE_*) leaks in. */
function environment(env: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node dist/cli.js ARGS` to completion (a command that exits by
 * itself, such as `check`). A process still alive after `timeoutMs` is
 * killed, and its result then has `code: null`.
 */
export function runCli(args: string[], env: Record<string, string> = {}, cwd = ROOT, timeoutMs = 15_000): Promise<CliResult> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: environment(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A gateway started through the real entry point. */
export interface GatewayProcess {
  child: ChildProcess;
  /** Every JSON log line on stdout so far, parsed. */
  logs: Array<Record<string, unknown>>;
  /** Raw stdout and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the first log line (already written or still to come) that matches. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Resolves when the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then the exit; SIGKILL if it is still alive after `timeoutMs`. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns `node dist/cli.js ARGS` and follows its stdout log. The caller
 * must end it (`t.teardown(() => gateway.stop())`).
 */
export function spawnCli(args: string[], env: Record<string, string> = {}, cwd = ROOT): GatewayProcess {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: environment(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  let stdout = '';
  let stderr = '';
  let pending = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    stdout += text;
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines.filter(Boolean)) {
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ unparsed: line });
      }
    }
    for (const wake of waiters) wake();
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      resolve({ code, signal });
      for (const wake of waiters) wake();
    });
  });

  function waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = logs.find(match);
        if (found) {
          done();
          resolve(found);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          done();
          reject(new Error(`the gateway exited (${child.exitCode ?? child.signalCode}) before the awaited log line; stderr: ${stderr}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching log line within ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  }

  async function stop(timeoutMs = 15_000) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    try {
      return await exited;
    } finally {
      clearTimeout(killer);
    }
  }

  return { child, logs, stdout: () => stdout, stderr: () => stderr, waitForLog, exited, stop };
}

/** The `address` of the `listening` line (public listener) or of `admin listening`. */
export async function listeningAddress(gateway: GatewayProcess, message: 'listening' | 'admin listening'): Promise<string> {
  const line = await gateway.waitForLog((log) => log.msg === message);
  return line.address as string;
}
