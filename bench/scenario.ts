import type { Cast } from './cast.js';

/** How big and how long: the full bench, or the quick smoke run that only proves every scenario runs. */
export interface Mode {
  quick: boolean;
  /**
   * Pairs per comparison: A then B within seconds, the order alternating
   * from pair to pair (bench/compare.ts `runPairs`); ratios are taken per pair.
   */
  pairs: number;
  /** Rounds of the large transfers and the WebSocket echo (each side once per round, alternating). */
  rounds: number;
  /** Seconds per load run (one side of a pair). */
  duration: number;
  /** Seconds of load on each target before the measured pairs (JIT, pools); 0: none. autocannon runs at least 1 s. */
  warmup: number;
  /** Fresh process pairs (bare proxy + gateway) the hot path's pairs are spread over (two processes of one program differ by several %). */
  generations: number;
  /** Users signed in for real for "many users refreshing". */
  users: number;
  /** Concurrent requests of one user in the refresh storm. */
  stormRequests: number;
  /** Warm-up bursts before a measured burst (a fresh process answers its first bursts several times slower). */
  burstWarmups: number;
  /** Sessions and cache size of the cold-session scenario (cache < users). */
  coldSessions: number;
  coldCacheSize: number;
  /** Sessions in the store-scale scenario, and how many lookups are timed. */
  storeSessions: number;
  lookups: number;
  /** Distinct sessions requested through the store-scale gateway. */
  storeRequestSessions: number;
  downloadBytes: number;
  uploadBytes: number;
  profileSeconds: number;
}

export const FULL: Mode = {
  quick: false,
  pairs: 10,
  rounds: 3,
  duration: 2,
  warmup: 2,
  generations: 2,
  users: 1000,
  stormRequests: 1000,
  burstWarmups: 4,
  coldSessions: 20_000,
  coldCacheSize: 1000,
  storeSessions: 1_000_000,
  lookups: 20_000,
  storeRequestSessions: 20_000,
  downloadBytes: 512 * 1024 ** 2,
  uploadBytes: 256 * 1024 ** 2,
  profileSeconds: 6,
};

export const QUICK: Mode = {
  quick: true,
  pairs: 1,
  rounds: 1,
  duration: 1,
  warmup: 0,
  generations: 1,
  users: 20,
  stormRequests: 1000,
  burstWarmups: 1,
  coldSessions: 2000,
  coldCacheSize: 100,
  storeSessions: 10_000,
  lookups: 1000,
  storeRequestSessions: 2000,
  downloadBytes: 16 * 1024 ** 2,
  uploadBytes: 16 * 1024 ** 2,
  profileSeconds: 1,
};

/** One line of the results table. Numbers are already formatted; raw values go to `data`. */
export interface Row {
  scenario: string;
  metric: string;
  baseline: string;
  gatehouse: string;
  /** gatehouse / baseline, or a difference, as text. */
  ratio: string;
  target: string;
  /** Whether the target is met (by the median of the pair ratios); undefined when the row has no target. */
  met?: boolean;
}

/** A correctness condition (never a speed): a failed check makes the bench exit non-zero. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface Outcome {
  name: string;
  rows: Row[];
  checks: Check[];
  /** Raw numbers for bench/results.json. */
  data: Record<string, unknown>;
  /** Extra text for BENCHMARKS.md (a profile's frames, for instance). */
  markdown?: string;
  seconds: number;
  skipped?: string;
  error?: string;
}

export interface Context {
  mode: Mode;
  cast: Cast;
  progress(message: string): void;
  /** Outcomes of the scenarios run before this one, by name. */
  earlier: ReadonlyMap<string, Outcome>;
}

export type Scenario = (context: Context) => Promise<Omit<Outcome, 'name' | 'seconds'>>;

export const MIB = 1024 * 1024;

export function fixed(value: number, digits = 0): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function ms(value: number): string {
  return `${fixed(value, 2)} ms`;
}

export function mib(bytes: number): string {
  return `${fixed(bytes / MIB, 1)} MiB`;
}

/** A difference with its sign: +1.20 ms, -0.30 ms. */
export function signed(value: number, digits: number, unit: string): string {
  return `${value >= 0 ? '+' : ''}${fixed(value, digits)} ${unit}`;
}

export function ratio(value: number): string {
  return `${fixed(value, 2)} ×`;
}

export function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}
