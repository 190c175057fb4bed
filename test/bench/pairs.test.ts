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
