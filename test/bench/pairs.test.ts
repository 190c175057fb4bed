import t from 'tap';
import { runPairs, spread, summarizePairs } from '../../bench/compare.js';
import type { LoadResult } from '../../bench/load.js';

/**
 * The pair form of the bench (BENCHMARKS.md "Method", bench/compare.ts): A
 * and B back to back, the order alternating, and ratios taken per pair, so
 * that a host that speeds up or slows down between pairs cancels out.
 */
function result(rps: number, cpuPerRequestUs = 100, p99 = 1): LoadResult {
  return { requests: rps, seconds: 1, rps, p50: p99 / 2, p99, max: p99, errors: 0, bytesPerSecond: rps * 1000, cpuPerRequestUs, serverBusy: 1, mainThreadShare: 1 };
}

t.test('pairs alternate which side runs first', async (t) => {
  const order: string[] = [];
  const pairs = await runPairs(
    4,
    async () => (order.push('a'), result(100)),
    async () => (order.push('b'), result(90)),
  );
  t.strictSame(order, ['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
  t.strictSame(
    pairs.map((pair) => pair.first),
    ['a', 'b', 'a', 'b'],
  );
  const shifted: string[] = [];
  await runPairs(
    2,
    async () => (shifted.push('a'), result(1)),
    async () => (shifted.push('b'), result(1)),
    1,
  );
  t.strictSame(shifted, ['b', 'a', 'a', 'b'], 'an odd offset starts with B (the second process generation of the hot path)');
});

t.test('a host whose speed drifts between pairs leaves the per-pair ratio alone', async (t) => {
  // The machine's speed halves and doubles from pair to pair; B is always 0.9 × A within a pair.
  const speeds = [1, 0.5, 2, 0.7, 1.3, 0.4, 1.8, 0.6, 1.1, 0.9];
  // runPairs calls each side once per pair, back to back: both runs of pair k see speeds[k].
  let pair = 0;
  const drifting = await runPairs(
    speeds.length,
    async () => result(10_000 * speeds[Math.floor(pair++ / 2)]!, 100),
    async () => result(9_000 * speeds[Math.floor(pair++ / 2)]!, 120),
  );
  const summary = summarizePairs(drifting);
  t.equal(summary.rate.n, 10);
  t.ok(Math.abs(summary.rate.median - 0.9) < 1e-9, `median pair ratio ${summary.rate.median}`);
  t.ok(Math.abs(summary.rate.q1 - 0.9) < 1e-9 && Math.abs(summary.rate.q3 - 0.9) < 1e-9, 'no spread: the drift cancelled in every pair');
  t.ok(Math.abs(summary.cpu.median - 1.2) < 1e-9, 'CPU per request ratio 1.2');
});

t.test('spread: median, quartiles and extremes', async (t) => {
  t.strictSame(spread([5, 1, 3, 2, 4]), { median: 3, q1: 2, q3: 4, min: 1, max: 5, n: 5 });
  t.strictSame(spread([1, 2, 3, 4]), { median: 2.5, q1: 1.75, q3: 3.25, min: 1, max: 4, n: 4 });
  t.equal(spread([1, Number.NaN, Number.POSITIVE_INFINITY, 3]).n, 2, 'a ratio over a run that answered nothing is left out');
});

t.test('two full runs side by side: a comparison agrees when the interquartile ranges overlap', async (t) => {
  const { agreementTable, comparisons } = await import('../../bench/runs.js');
  const s = (median: number, q1: number, q3: number) => ({ median, q1, q3, min: q1, max: q3, n: 10 });
  const run = (startedAt: string, hot: number, log: number) => ({
    startedAt,
    outcomes: [
      { name: 'hot path', rows: [], checks: [], seconds: 1, data: { connections50: { rate: s(hot, hot - 0.02, hot + 0.02), cpu: s(1, 0.98, 1.02), pairs: [] }, idleRss: { baseline: [1] } } },
      { name: 'access log', rows: [], checks: [], seconds: 1, data: { infoFile: { rate: s(log, log - 0.01, log + 0.01), cpu: s(1.1, 1.05, 1.15) } } },
    ],
  });
  const first = run('2026-11-27T13:20:00.000Z', 0.95, 0.8);
  const second = run('2026-11-27T13:40:00.000Z', 0.97, 0.9);
  t.strictSame(
    comparisons(second).map((c) => c.key),
    ['hot path / connections50', 'access log / infoFile'],
  );
  const table = agreementTable(first, second);
  t.match(table, /^3 of 4 ratios agree/);
  t.match(table, /\| hot path \/ connections50 \| 0\.95 \(0\.93–0\.97\) \| 0\.97 \(0\.95–0\.99\) \| yes \|/);
  t.match(table, /\| access log \/ infoFile \| 0\.80 \(0\.79–0\.81\) \| 0\.90 \(0\.89–0\.91\) \| NO \|/);
});
