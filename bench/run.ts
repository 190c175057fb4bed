/**
 * `npm run bench [-- --quick] [-- --only=hot,cold]`: gatehouse beside a bare
 * @fastify/http-proxy, every scenario, a table on stdout, bench/results.json
 * and BENCHMARKS.md (quick mode writes dist-bench/results.quick.json only).
 * Exits non-zero when a scenario fails or a correctness check does not hold
 * (the refresh storm's single grant above all); speed is reported, never asserted.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ROOT, startCast, type Cast } from './cast.js';
import { describeMachine } from './machine.js';
import { canPin, DRIVER_CORE } from './processes.js';
import { checksText, textTable, writeBenchmarks, writeResults, type Report } from './report.js';
import { FULL, QUICK, type Outcome, type Scenario } from './scenario.js';
import { accessLog } from './scenarios/access-log.js';
import { apache } from './scenarios/apache.js';
import { coldSession } from './scenarios/cold-session.js';
import { hotPath } from './scenarios/hot-path.js';
import { dpopHotPath } from './scenarios/dpop.js';
import { routesHotPath } from './scenarios/routes.js';
import { sitesHotPath } from './scenarios/sites.js';
import { tokenTargetHotPath } from './scenarios/token-target.js';
import { assertionHotPath } from './scenarios/assertion.js';
import { bearerHotPath } from './scenarios/bearer.js';
import { manyUsers } from './scenarios/many-users.js';
import { profile } from './scenarios/profile.js';
import { refreshStorm } from './scenarios/refresh-storm.js';
import { semiSpace } from './scenarios/semi-space.js';
import { storeScale } from './scenarios/store-scale.js';
import { streaming } from './scenarios/streaming.js';
import { websocket } from './scenarios/websocket.js';

const PINNED_ENV = 'GATEHOUSE_BENCH_PINNED';

const SCENARIOS: Array<{ key: string; name: string; run: Scenario }> = [
  { key: 'hot', name: 'hot path', run: hotPath },
  { key: 'dpop', name: 'DPoP hot path', run: dpopHotPath },
  { key: 'routes', name: '20 routes hot path', run: routesHotPath },
  { key: 'sites', name: '20 sites hot path', run: sitesHotPath },
  { key: 'target', name: 'token target hot path', run: tokenTargetHotPath },
  { key: 'assertion', name: 'identity assertion hot path', run: assertionHotPath },
  { key: 'bearer', name: 'machine-client bearer hot path', run: bearerHotPath },
  { key: 'log', name: 'access log', run: accessLog },
  { key: 'semispace', name: 'young-generation cap', run: semiSpace },
  { key: 'cold', name: 'cold session', run: coldSession },
  { key: 'storm', name: 'refresh storm', run: refreshStorm },
  { key: 'users', name: 'many users refreshing', run: manyUsers },
  { key: 'stream', name: 'streaming', run: streaming },
  { key: 'websocket', name: 'WebSockets', run: websocket },
  { key: 'store', name: 'store scale', run: storeScale },
  { key: 'profile', name: 'hot-path profile', run: profile },
  { key: 'apache', name: 'Apache + mod_auth_openidc', run: apache },
];

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const { values } = parseArgs({ args, options: { quick: { type: 'boolean' }, only: { type: 'string' } } });
  // Under `taskset -c 1` this process sees one core: the re-executed driver knows from its environment.
  const reexecuted = process.env[PINNED_ENV] === '1';
  const pinnable = reexecuted || (availableParallelism() >= 2 && canPin());
  if (pinnable && !reexecuted) {
    // The driver (load generator, AS) and the upstream take core 1; the servers measured get core 0.
    const script = fileURLToPath(import.meta.url);
    const child = spawnSync('taskset', ['-c', DRIVER_CORE, process.execPath, script, ...args], { stdio: 'inherit', env: { ...process.env, [PINNED_ENV]: '1' } });
    return child.status ?? 1;
  }
  const mode = values.quick ? QUICK : FULL;
  const only = values.only?.split(',');
  const command = `npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
  const machine = describeMachine(pinnable, command);
  const started = Date.now();
  const log = (message: string) => process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1)} s] ${message}\n`);
  log(`${mode.quick ? 'quick' : 'full'} run; load average ${machine.loadAverageAtStart.join(' ')}; ${pinnable ? 'servers on core 0, driver on core 1' : 'not pinned'}`);

  const cast = await startCast({ pinned: pinnable });
  stopOnSignal(cast);
  const outcomes: Outcome[] = [];
  const earlier = new Map<string, Outcome>();
  try {
    for (const scenario of SCENARIOS) {
      if (only !== undefined && !only.includes(scenario.key)) continue;
      const scenarioStarted = Date.now();
      log(`${scenario.name}`);
      let outcome: Outcome;
      try {
        const result = await scenario.run({ mode, cast, progress: log, earlier });
        outcome = { name: scenario.name, ...result, seconds: (Date.now() - scenarioStarted) / 1000 };
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        log(`${scenario.name} FAILED: ${err instanceof Error ? err.stack : message}`);
        outcome = { name: scenario.name, rows: [], checks: [], data: {}, seconds: (Date.now() - scenarioStarted) / 1000, error: message };
      }
      outcomes.push(outcome);
      earlier.set(scenario.name, outcome);
    }
  } finally {
    await cast.close();
  }

  const report = { startedAt: new Date(started).toISOString(), seconds: (Date.now() - started) / 1000, mode, machine, outcomes };
  process.stdout.write(`\n${textTable(outcomes)}\n\n${checksText(outcomes)}\n`);
  if (mode.quick || only !== undefined) {
    writeResults(join(ROOT, 'dist-bench', mode.quick ? 'results.quick.json' : 'results.partial.json'), report);
  } else {
    // The previous full run stays beside this one: BENCHMARKS.md shows whether their ratios agree within their spreads.
    const resultsFile = join(ROOT, 'bench', 'results.json');
    const previous = readPrevious(resultsFile);
    if (previous !== undefined) writeResults(join(ROOT, 'bench', 'results.previous.json'), previous);
    writeResults(resultsFile, report);
    writeBenchmarks(join(ROOT, 'BENCHMARKS.md'), report, previous);
  }
  const failed = outcomes.filter((outcome) => outcome.error !== undefined || outcome.checks.some((c) => !c.ok));
  process.stdout.write(`\n${failed.length === 0 ? 'bench ok' : `bench FAILED: ${failed.map((outcome) => outcome.name).join(', ')}`} (${report.seconds.toFixed(1)} s)\n`);
  return failed.length === 0 ? 0 : 1;
}

/** The last full run's report, if bench/results.json holds one in pair form. */
function readPrevious(file: string): Report | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const report = JSON.parse(readFileSync(file, 'utf8')) as Report;
    return report.mode?.quick === false && typeof report.mode.pairs === 'number' ? report : undefined;
  } catch {
    return undefined;
  }
}

/** Ctrl+C must not leave a gateway, the baseline or the upstream running. */
function stopOnSignal(cast: Cast): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void cast.close().finally(() => process.exit(130));
    });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
