import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/cli-process.js';

/**
 * `package.json` "bin" points at dist/cli.js, which `npx gatehouse` runs
 * directly: tsc writes it without the run bit, so a fresh build
 * (`rm -rf dist && npm run build`) must set it, or `npx gatehouse` says
 * "Permission denied". The build runs in a copy of the sources, never on
 * the dist/ that other test files are using.
 */
t.setTimeout(300_000);

function run(command: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: 240_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

t.test('npm run build from scratch leaves dist/cli.js executable, and it runs by itself', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-build-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const entry of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'config']) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const build = await run('npm', ['run', 'build'], dir);
  t.equal(build.code, 0, build.stderr);
  const mode = statSync(join(dir, 'dist/cli.js')).mode;
  t.equal(mode & 0o111, 0o111, `dist/cli.js is executable by everyone (mode ${(mode & 0o777).toString(8)})`);
  const version = await run(join(dir, 'dist/cli.js'), ['--version'], dir);
  t.equal(version.code, 0, version.stderr);
  t.match(version.stdout, /^\d+\.\d+\.\d+\n$/, 'runs through its shebang');
});
