import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { ROOT } from '../helpers/cli-process.js';
import { parseDockerfile, readDockerfile } from './dockerfile.js';

/**
 * The young-generation cap (README "Memory"): `npm start` and the image's
 * ENTRYPOINT run node with the same flags, `--max-semi-space-size=2` among
 * them, and the bench's gateways take theirs from `npm start`
 * (bench/cast.ts GATEWAY_NODE_FLAGS), so what BENCHMARKS.md measures is what runs.
 */
const startScript = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;

function entrypoint(): string[] {
  const stages = parseDockerfile(readDockerfile(ROOT));
  const line = stages.at(-1)!.instructions.filter((instruction) => instruction.keyword === 'ENTRYPOINT').at(-1);
  return JSON.parse(line!.args) as string[];
}

t.test('npm start and the image entry point run node with the same flags, the young-generation cap among them', async (t) => {
  const start = startScript.split(/\s+/);
  t.equal(start[0], 'node');
  t.equal(start.at(-1), 'dist/cli.js');
  const image = entrypoint();
  t.equal(image[0], 'node');
  t.equal(image.at(-1), '/app/dist/cli.js');
  t.strictSame(image.slice(1, -1), start.slice(1, -1), 'the same node flags, in the same order');
  t.ok(start.includes('--max-semi-space-size=2'), `npm start caps the semi-spaces: ${startScript}`);
});

t.test('the cap is in force in a process started with those flags: the young generation stays within 8 MiB under allocation', async (t) => {
  const flags = startScript.split(/\s+/).slice(1, -1);
  // Objects that survive a scavenge or two make V8 grow the young generation (to 128 MiB on Node 24 without a cap).
  const script = `const v8 = require('node:v8'); let keep = []; for (let i = 0; i < 3e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 200000) keep = []; }
    process.stdout.write(String(v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size));`;
  const probe = spawnSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8' });
  t.equal(probe.status, 0, probe.stderr);
  const newSpace = Number(probe.stdout);
  t.ok(newSpace > 0 && newSpace <= 8 * 1024 * 1024, `new space ${newSpace} bytes after much allocation, ≤ 8 MiB (two 2 MiB semi-spaces and a page or two; 128 MiB without the cap)`);
});
