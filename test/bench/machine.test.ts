import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

/**
 * BENCHMARKS.md's "Machine: N × CPU" line: the bench's driver runs pinned to
 * one core (`taskset -c 1`), and must still report every core of the machine.
 */
t.test('the core count is the machine\'s, also from a process pinned to one core', async (t) => {
  const probe = spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
  if (probe.error !== undefined || probe.status !== 0) {
    t.fail('taskset is needed for this test (util-linux)');
    return;
  }
  const machine = fileURLToPath(new URL('../../bench/machine.ts', import.meta.url));
  const script = `const { describeMachine } = await import(${JSON.stringify(machine)}); process.stdout.write(String(describeMachine(true, 'x').nproc));`;
  const child = spawnSync('taskset', ['-c', '0', process.execPath, ...process.execArgv, '--input-type=module', '-e', script], { encoding: 'utf8' });
  t.equal(child.status, 0, child.stderr);
  t.equal(Number(child.stdout.trim()), cpus().length, `${cpus().length} cores reported from a process pinned to core 0`);
});
