import { interleave, load, type LoadOptions, type LoadResult } from './load.js';
import type { Child } from './processes.js';
import { check, fixed, ms, ratio, signed, type Check, type Mode, type Row } from './scenario.js';

export interface Target {
  url: string;
  child: Child;
}

/** Medians of interleaved rounds against the baseline (A) and gatehouse (B), all rounds kept. */
export interface Pair {
  baseline: LoadResult;
  gatehouse: LoadResult;
  rounds: { baseline: LoadResult[]; gatehouse: LoadResult[] };
}

export type Shape = Omit<LoadOptions, 'url' | 'server' | 'duration' | 'amount'>;

/**
 * Warms both targets up, then runs `mode.rounds` rounds of each, A B A B,
 * with the same requests (the baseline gets the same cookies, ignored).
 */
export async function comparePair(mode: Mode, path: string, shape: Shape, baseline: Target, gatehouse: Target, duration = mode.duration): Promise<Pair> {
  const run = (target: Target, seconds: number) => load({ ...shape, url: `${target.url}${path}`, server: target.child, duration: seconds });
  if (mode.warmup > 0) {
    await run(baseline, mode.warmup);
    await run(gatehouse, mode.warmup);
  }
  const result = await interleave(
    mode.rounds,
    () => run(baseline, duration),
    () => run(gatehouse, duration),
  );
  return { baseline: result.a, gatehouse: result.b, rounds: { baseline: result.roundsA, gatehouse: result.roundsB } };
}

/** req/s (with its target ratio), p50/p99 latency, CPU per request and how busy the server core was. */
export function pairRows(scenario: string, pair: Pair, targets: { rps?: number; p99PlusMs?: number; cpuPerRequest?: number } = {}): Row[] {
  const { baseline: a, gatehouse: b } = pair;
  const rpsRatio = b.rps / a.rps;
  const p99Delta = b.p99 - a.p99;
  return [
    {
      scenario,
      metric: 'req/s',
      baseline: fixed(a.rps),
      gatehouse: fixed(b.rps),
      ratio: ratio(rpsRatio),
      target: targets.rps === undefined ? '' : `≥ ${fixed(targets.rps, 2)} ×`,
      met: targets.rps === undefined ? undefined : rpsRatio >= targets.rps,
    },
    {
      scenario,
      metric: 'p99 latency',
      baseline: ms(a.p99),
      gatehouse: ms(b.p99),
      ratio: signed(p99Delta, 2, 'ms'),
      target: targets.p99PlusMs === undefined ? '' : `≤ +${targets.p99PlusMs} ms`,
      met: targets.p99PlusMs === undefined ? undefined : p99Delta <= targets.p99PlusMs,
    },
    { scenario, metric: 'p50 latency', baseline: ms(a.p50), gatehouse: ms(b.p50), ratio: signed(b.p50 - a.p50, 2, 'ms'), target: '' },
    {
      scenario,
      metric: 'server CPU per request',
      baseline: `${fixed(a.cpuPerRequestUs)} µs`,
      gatehouse: `${fixed(b.cpuPerRequestUs)} µs`,
      ratio: ratio(b.cpuPerRequestUs / a.cpuPerRequestUs),
      target: targets.cpuPerRequest === undefined ? '' : `≤ ${fixed(targets.cpuPerRequest, 2)} ×`,
      ...(targets.cpuPerRequest === undefined ? {} : { met: b.cpuPerRequestUs / a.cpuPerRequestUs <= targets.cpuPerRequest }),
    },
    {
      scenario,
      metric: 'server core busy (main thread share)',
      baseline: `${fixed(a.serverBusy * 100)} % (${fixed(a.mainThreadShare * 100)} %)`,
      gatehouse: `${fixed(b.serverBusy * 100)} % (${fixed(b.mainThreadShare * 100)} %)`,
      ratio: '',
      target: '',
    },
  ];
}

/** No errors, timeouts or non-2xx answers in any round of either target. */
export function noErrors(scenario: string, pair: Pair): Check {
  const errors = pair.baseline.errors + pair.gatehouse.errors;
  return check(`${scenario}: no errors`, errors === 0, `baseline ${pair.baseline.errors}, gatehouse ${pair.gatehouse.errors} errors/non-2xx`);
}

/** The raw medians and rounds for results.json. */
export function pairData(pair: Pair): Record<string, unknown> {
  return { baseline: pair.baseline, gatehouse: pair.gatehouse, rounds: pair.rounds };
}
