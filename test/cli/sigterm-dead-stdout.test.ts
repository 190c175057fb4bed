import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { CLI, ensureBuilt } from '../helpers/cli-process.js';
import { startCast, type Cast } from './cast.js';

/**
 * README "Run it": SIGTERM drains and exits 0 whatever became of the log's
 * reader. `gatehouse … | head` (or a log shipper that died) leaves stdout a
 * pipe without a reader, so every write fails with EPIPE; the gateway used
 * to hang for ever at exit, retrying the lines still buffered
 * (src/stdout-log.ts). With a reader, no line is lost on the way out.
 */

t.before(ensureBuilt);

/** Within the drain time (shutdownGrace 3 s) with margin for a busy machine, far below the 15 s kill. */
const EXIT_WITHIN_MS = 6000;

function startGateway(cast: Cast, stdout: 'pipe' | NodeJS.WritableStream): ChildProcess {
  return spawn(process.execPath, [CLI, '--config', cast.configFile], {
    cwd: cast.dir,
    env: { PATH: process.env.PATH, ...cast.env },
    stdio: ['ignore', stdout as 'pipe', 'pipe'],
  });
}

/** SIGTERM, then the exit (its stdio closed) and how long it took; SIGKILL after 15 s (then code null, signal SIGKILL). */
async function terminate(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const exited = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  const started = Date.now();
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const [code, signal] = await exited;
  clearTimeout(killer);
  return { code, signal, ms: Date.now() - started };
}

t.test('stdout piped into a reader that has exited: SIGTERM exits 0 within the drain time, after requests or none', async (t) => {
  for (const requests of [0, 5, 0, 5]) {
    const cast = await startCast({ serverYaml: '  shutdownGrace: 3s\n' });
    t.teardown(() => cast.close());
    // The reader takes the first log lines and exits, as `gatehouse | head -c 100` would.
    const reader = spawn('head', ['-c', '100'], { stdio: ['pipe', 'ignore', 'ignore'] });
    const gateway = startGateway(cast, reader.stdin);
    let stderr = '';
    gateway.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    t.teardown(() => {
      if (gateway.exitCode === null && gateway.signalCode === null) gateway.kill('SIGKILL');
    });
    await once(reader, 'exit');
    reader.stdin.destroy();
    // Listening, known without a request: a request would log a line, and the
    // gateway would learn of the lost reader from its write before SIGTERM.
    await untilListening(cast.publicUrl);

    // The lines of these requests and of the shutdown are buffered when the
    // process exits: it must write them or give them up, never wait.
    const answers = await Promise.all(Array.from({ length: requests }, () => fetch(`${cast.publicUrl}/session`)));
    t.strictSame(
      answers.map((answer) => answer.status),
      answers.map(() => 401),
      `${requests} requests answered`,
    );
    const exit = await terminate(gateway);
    t.strictSame({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, `after ${requests} requests: exit code 0 (took ${exit.ms} ms)`);
    t.ok(exit.ms < EXIT_WITHIN_MS, `after ${requests} requests: it exited in ${exit.ms} ms, within the drain time`);
    t.equal(stderr, '', 'nothing on stderr: the lost reader is not an error of the gateway');
  }
});

t.test('with a reader, every access-log line and the stop line reach stdout when SIGTERM follows the requests at once', async (t) => {
  const cast = await startCast({ serverYaml: '  shutdownGrace: 3s\n' });
  t.teardown(() => cast.close());
  const gateway = startGateway(cast, 'pipe');
  t.teardown(() => {
    if (gateway.exitCode === null && gateway.signalCode === null) gateway.kill('SIGKILL');
  });
  let stdout = '';
  gateway.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  await waitForAnswer(`${cast.publicUrl}/session`);

  const requests = 300;
  for (let index = 0; index < requests; index += 1) await fetch(`${cast.publicUrl}/session/${index}`);
  const exit = await terminate(gateway);
  t.strictSame({ code: exit.code, signal: exit.signal }, { code: 0, signal: null });
  const lines = stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as { msg: string; path?: string });
  t.strictSame(accessPaths(lines), Array.from({ length: requests }, (_, index) => `/session/${index}`), 'one access-log line per request, none lost in the buffer');
  t.equal(lines.at(-1)!.msg, 'stopped', 'the stop line is the last one');
});

/** The paths of the access-log lines of the numbered requests, in order. */
function accessPaths(lines: Array<{ msg: string; path?: string }>): string[] {
  return lines.filter((line) => line.msg === 'request completed' && line.path?.startsWith('/session/')).map((line) => line.path!);
}

/** Resolves once the listener of `url` accepts a TCP connection (closed at once, no request sent). */
async function untilListening(url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const socket = connect(Number(port), hostname);
    // events.once rejects on 'error': a refused connection is "not yet", not a failure.
    const connected = await once(socket, 'connect').then(
      () => true,
      () => false,
    );
    socket.destroy();
    if (connected) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${url}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function waitForAnswer(url: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await fetch(url);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
