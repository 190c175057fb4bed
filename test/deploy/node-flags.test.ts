import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { ROOT } from '../helpers/cli-process.js';
import { parseDockerfile, readDockerfile } from './dockerfile.js';

/**
 * How the gateway's node runs (README "Memory"): `npm start` and the image's
 * ENTRYPOINT with the same flags, and the bench's gateways with those of
 * `npm start` (bench/cast.ts GATEWAY_NODE_FLAGS), so what BENCHMARKS.md
 * measures is what runs. The young-generation cap is not among them: in
 * BENCHMARKS.md's pairs it cost 19–30 % of the hot path's throughput. It is
 * the operator's choice, through NODE_OPTIONS.
 */
const startScript = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
const CAP = '--max-semi-space-size=2';

function entrypoint(): string[] {
  const stages = parseDockerfile(readDockerfile(ROOT));
  const line = stages.at(-1)!.instructions.filter((instruction) => instruction.keyword === 'ENTRYPOINT').at(-1);
  return JSON.parse(line!.args) as string[];
}

t.test('npm start and the image entry point run node with the same flags, and V8 sizes its own young generation', async (t) => {
  const start = startScript.split(/\s+/);
  t.equal(start[0], 'node');
  t.equal(start.at(-1), 'dist/cli.js');
  const image = entrypoint();
  t.equal(image[0], 'node');
  t.equal(image.at(-1), '/app/dist/cli.js');
  t.strictSame(image.slice(1, -1), start.slice(1, -1), 'the same node flags, in the same order');
  t.notOk(
    [...start, ...image].some((word) => word.startsWith('--max-semi-space-size')),
    `no young-generation cap by default: ${startScript}`,
  );
});

/** The new space's size after much allocation, in a node started with `flags` and NODE_OPTIONS `nodeOptions`. */
function newSpaceAfterAllocation(flags: string[], nodeOptions: string): number {
  // Objects that survive a scavenge or two make V8 grow the young generation (to 128 MiB on Node 24 without a cap).
  const script = `const v8 = require('node:v8'); let keep = []; for (let i = 0; i < 3e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 200000) keep = []; }
    process.stdout.write(String(v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size));`;
  const probe = spawnSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: nodeOptions } });
  if (probe.status !== 0) throw new Error(probe.stderr);
  return Number(probe.stdout);
}

t.test('the cap README "Memory" offers works through NODE_OPTIONS: the young generation stays within 8 MiB under allocation, and grows past it without', async (t) => {
  const flags = startScript.split(/\s+/).slice(1, -1);
  const capped = newSpaceAfterAllocation(flags, CAP);
  t.ok(capped > 0 && capped <= 8 * 1024 * 1024, `with NODE_OPTIONS=${CAP}: new space ${capped} bytes, ≤ 8 MiB (two 2 MiB semi-spaces and a page or two)`);
  const uncapped = newSpaceAfterAllocation(flags, '');
  t.ok(uncapped > 8 * 1024 * 1024, `as npm start runs it: new space ${uncapped} bytes, more than 8 MiB`);
});
