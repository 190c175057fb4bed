import { load, medianOf, type LoadOptions, type LoadResult } from './load.js';
import type { Child } from './processes.js';
import { check, fixed, ms, type Check, type Mode, type Row } from './scenario.js';

export interface Target {
  url: string;
  child: Child;
}

/** One pair: A and B measured back to back, `first` said which ran first. */
export interface PairRun {
  first: 'a' | 'b';
  a: LoadResult;
  b: LoadResult;
}

/** The median of some per-pair values and how far they spread: quartiles and extremes. */
export interface Spread {
  median: number;
  q1: number;
  q3: number;
  min: number;
  max: number;
  n: number;
}

/**
 * A comparison in pair form: A (the baseline column) against B (gatehouse, or
 * the variant measured). `rate` is the median of the per-pair ratios B/A of
 * the throughput, `cpu` of CPU per request B/A, `p99` of the per-pair
 * differences of p99 latency (ms); `baseline`/`gatehouse` are the medians of
 * each side's runs, for the absolute columns.
 */
export interface Pair {
  baseline: LoadResult;
  gatehouse: LoadResult;
  pairs: PairRun[];
  rate: Spread;
  cpu: Spread;
  p99: Spread;
}

export type Shape = Omit<LoadOptions, 'url' | 'server' | 'duration' | 'amount'>;

/** Quantile q (0..1) of sorted values, linear between the closest ranks. */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (at - low);
}

export function spread(values: readonly number[]): Spread {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((x, y) => x - y);
  return {
    median: quantile(sorted, 0.5),
    q1: quantile(sorted, 0.25),
    q3: quantile(sorted, 0.75),
    min: sorted[0] ?? 0,
    max: sorted[sorted.length - 1] ?? 0,
    n: sorted.length,
  };
}

/**
 * `count` pairs of runs, A then B in even pairs and B then A in odd ones
 * (`offset` shifts the alternation, for series split over several process
 * generations), so that whatever the host does between two runs a few seconds
 * apart falls on both sides alike and cancels in the pair's ratio.
 */
export async function runPairs(count: number, a: () => Promise<LoadResult>, b: () => Promise<LoadResult>, offset = 0): Promise<PairRun[]> {
  const pairs: PairRun[] = [];
  for (let k = 0; k < count; k += 1) {
    if ((k + offset) % 2 === 0) {
      const first = await a();
      pairs.push({ first: 'a', a: first, b: await b() });
    } else {
      const first = await b();
      pairs.push({ first: 'b', a: await a(), b: first });
    }
  }
  return pairs;
}

/** Per-pair ratios of `metric` (req/s, or bytes per second for large responses), CPU per request, and p99 differences. */
export function summarizePairs(pairs: readonly PairRun[], metric: 'rps' | 'bytesPerSecond' = 'rps'): Pair {
  return {
    baseline: medianOf(pairs.map((pair) => pair.a)),
    gatehouse: medianOf(pairs.map((pair) => pair.b)),
    pairs: [...pairs],
    rate: spread(pairs.map((pair) => pair.b[metric] / pair.a[metric])),
    cpu: spread(pairs.map((pair) => pair.b.cpuPerRequestUs / pair.a.cpuPerRequestUs)),
    p99: spread(pairs.map((pair) => pair.b.p99 - pair.a.p99)),
  };
}

/** Warm-up on both targets, then `mode.pairs` pairs with the same requests (the baseline gets the same cookies, ignored). */
export async function comparePair(
  mode: Mode,
  path: string,
  shape: Shape,
  baseline: Target,
  gatehouse: Target,
  options: { metric?: 'rps' | 'bytesPerSecond'; gatehousePath?: string } = {},
): Promise<Pair> {
  const run = (target: Target, targetPath: string, seconds: number) => load({ ...shape, url: `${target.url}${targetPath}`, server: target.child, duration: seconds });
  const gatehousePath = options.gatehousePath ?? path;
  if (mode.warmup > 0) {
    await run(baseline, path, mode.warmup);
    await run(gatehouse, gatehousePath, mode.warmup);
  }
  const pairs = await runPairs(
    mode.pairs,
    () => run(baseline, path, mode.duration),
    () => run(gatehouse, gatehousePath, mode.duration),
  );
  return summarizePairs(pairs, options.metric);
}

/** "0.93 × (IQR 0.90–0.95)": the median pair ratio and its interquartile range. */
export function ratioWithSpread(s: Spread, digits = 2): string {
  return `${fixed(s.median, digits)} × (IQR ${fixed(s.q1, digits)}–${fixed(s.q3, digits)})`;
}

function deltaWithSpread(s: Spread, unit: string, digits = 2): string {
  const sign = (value: number) => `${value >= 0 ? '+' : ''}${fixed(value, digits)}`;
  return `${sign(s.median)} ${unit} (IQR ${sign(s.q1)}–${sign(s.q3)})`;
}

export interface PairTargets {
  /** B/A throughput at least this (median of the pair ratios). */
  rps?: number;
  /** B's p99 at most this many ms above A's (median of the pair differences). */
  p99PlusMs?: number;
  /** B/A CPU per request at most this. */
  cpuPerRequest?: number;
}

/**
 * The rows of one comparison: throughput ratio (with CPU per request beside
 * each absolute figure), CPU per request ratio, p99 difference, how busy the
 * server core was. Each ratio is the median of the per-pair ratios with its
 * interquartile range; a target is met when that median meets it.
 */
export function pairRows(scenario: string, pair: Pair, targets: PairTargets = {}, unit: 'req/s' | 'MiB/s' = 'req/s'): Row[] {
  const { baseline: a, gatehouse: b } = pair;
  const rate = (result: LoadResult) =>
    `${unit === 'req/s' ? fixed(result.rps) : fixed(result.bytesPerSecond / 1024 / 1024, 1)} ${unit}, ${fixed(result.cpuPerRequestUs)} µs CPU/req`;
  return [
    {
      scenario,
      metric: `${unit} (pair ratio, ${pair.rate.n} pairs)`,
      baseline: rate(a),
      gatehouse: rate(b),
      ratio: ratioWithSpread(pair.rate),
      target: targets.rps === undefined ? '' : `≥ ${fixed(targets.rps, 2)} ×`,
      met: targets.rps === undefined ? undefined : pair.rate.median >= targets.rps,
    },
    {
      scenario,
      metric: 'server CPU per request (pair ratio)',
      baseline: `${fixed(a.cpuPerRequestUs)} µs`,
      gatehouse: `${fixed(b.cpuPerRequestUs)} µs`,
      ratio: ratioWithSpread(pair.cpu),
      target: targets.cpuPerRequest === undefined ? '' : `≤ ${fixed(targets.cpuPerRequest, 2)} ×`,
      met: targets.cpuPerRequest === undefined ? undefined : pair.cpu.median <= targets.cpuPerRequest,
    },
    {
      scenario,
      metric: 'p99 latency (pair difference)',
      baseline: ms(a.p99),
      gatehouse: ms(b.p99),
      ratio: deltaWithSpread(pair.p99, 'ms'),
      target: targets.p99PlusMs === undefined ? '' : `≤ +${targets.p99PlusMs} ms`,
      met: targets.p99PlusMs === undefined ? undefined : pair.p99.median <= targets.p99PlusMs,
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

/** No errors, timeouts or non-2xx answers in any run of either side. */
export function noErrors(scenario: string, pair: Pair): Check {
  const count = (side: 'a' | 'b') => pair.pairs.reduce((sum, run) => sum + run[side].errors, 0);
  return check(`${scenario}: no errors`, count('a') + count('b') === 0, `baseline ${count('a')}, gatehouse ${count('b')} errors/non-2xx`);
}

/** The medians, the per-pair spreads and every run, for results.json. */
export function pairData(pair: Pair): Record<string, unknown> {
  return { baseline: pair.baseline, gatehouse: pair.gatehouse, rate: pair.rate, cpu: pair.cpu, p99: pair.p99, pairs: pair.pairs };
}
