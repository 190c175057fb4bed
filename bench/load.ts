import autocannon from 'autocannon';
import type { Child } from './processes.js';

/** One autocannon run against one target. */
export interface LoadOptions {
  url: string;
  connections: number;
  /** Seconds; ignored when `amount` is given. */
  duration?: number;
  /** Total requests, then stop (one per connection for a burst). */
  amount?: number;
  headers?: Record<string, string>;
  /** Cookie headers taken in turn, one per request across all connections (cold caches, many users). */
  cookies?: readonly string[];
  /** The process serving the requests, whose CPU time is measured. */
  server?: Child;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Latency percentiles in ms, from every response's own timing (autocannon's histogram keeps whole ms only). */
  p50: number;
  p99: number;
  max: number;
  /** Transport errors, timeouts and non-2xx answers. */
  errors: number;
  bytesPerSecond: number;
  /** CPU seconds the server process used per request, µs (0 when no server was given). */
  cpuPerRequestUs: number;
  /** Share of one core the server process used over the run (1 = saturated). */
  serverBusy: number;
  /** Share of the server's CPU time spent on its main thread (the rest: GC helpers, the libuv pool). */
  mainThreadShare: number;
}

/** Runs autocannon once and measures the server process's CPU alongside. */
export async function load(options: LoadOptions): Promise<LoadResult> {
  const times = new LatencyRecorder();
  const cookies = options.cookies;
  let next = 0;
  const requests =
    cookies === undefined
      ? undefined
      : [
          {
            setupRequest: (request: autocannon.Request) => {
              request.headers = { ...options.headers, cookie: cookies[next++ % cookies.length]! };
              return request;
            },
          },
        ];
  const cpuBefore = options.server?.cpuSeconds() ?? 0;
  const mainBefore = options.server?.mainThreadCpuSeconds() ?? 0;
  const started = process.hrtime.bigint();
  const instance = autocannon({
    url: options.url,
    connections: options.connections,
    pipelining: 1,
    timeout: 30,
    ...(options.amount === undefined ? { duration: options.duration ?? 5 } : { amount: options.amount }),
    headers: options.headers ?? {},
    ...(requests === undefined ? {} : { requests }),
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) times.add(ms);
  });
  const result = await instance;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = (options.server?.cpuSeconds() ?? cpuBefore) - cpuBefore;
  const main = (options.server?.mainThreadCpuSeconds() ?? mainBefore) - mainBefore;
  const completed = result.requests.total;
  return {
    requests: completed,
    seconds,
    rps: completed / seconds,
    p50: times.percentile(0.5),
    p99: times.percentile(0.99),
    max: times.percentile(1),
    errors: result.errors + result.timeouts + result.non2xx,
    bytesPerSecond: result.throughput.total / seconds,
    cpuPerRequestUs: options.server && completed > 0 ? (cpu / completed) * 1e6 : 0,
    serverBusy: options.server ? cpu / seconds : 0,
    mainThreadShare: cpu > 0 ? main / cpu : 0,
  };
}

/** Response times in ms, kept whole so that percentiles are exact. */
export class LatencyRecorder {
  #values = new Float64Array(1 << 16);
  #count = 0;

  add(ms: number): void {
    if (this.#count === this.#values.length) {
      const grown = new Float64Array(this.#values.length * 2);
      grown.set(this.#values);
      this.#values = grown;
    }
    this.#values[this.#count++] = ms;
  }

  get count(): number {
    return this.#count;
  }

  /** The value at quantile q (0..1), nearest-rank; 0 when empty. */
  percentile(q: number): number {
    if (this.#count === 0) return 0;
    const sorted = this.#values.subarray(0, this.#count).sort();
    return sorted[Math.min(this.#count - 1, Math.max(0, Math.ceil(q * this.#count) - 1))]!;
  }
}

/** The median of some numbers (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Medians of each numeric field of a set of results. */
export function medianOf(results: readonly LoadResult[]): LoadResult {
  const pick = (key: keyof LoadResult) => median(results.map((result) => result[key]));
  return {
    requests: pick('requests'),
    seconds: pick('seconds'),
    rps: pick('rps'),
    p50: pick('p50'),
    p99: pick('p99'),
    max: pick('max'),
    errors: results.reduce((sum, result) => sum + result.errors, 0),
    bytesPerSecond: pick('bytesPerSecond'),
    cpuPerRequestUs: pick('cpuPerRequestUs'),
    serverBusy: pick('serverBusy'),
    mainThreadShare: pick('mainThreadShare'),
  };
}

/**
 * A B A B ...: `rounds` runs of each target, alternating, so that drift in
 * the machine (other load, thermal, page cache) falls on both equally.
 * Errors are summed over all rounds; everything else is the median.
 */
export async function interleave(
  rounds: number,
  a: () => Promise<LoadResult>,
  b: () => Promise<LoadResult>,
): Promise<{ a: LoadResult; b: LoadResult; roundsA: LoadResult[]; roundsB: LoadResult[] }> {
  const roundsA: LoadResult[] = [];
  const roundsB: LoadResult[] = [];
  for (let round = 0; round < rounds; round += 1) {
    roundsA.push(await a());
    roundsB.push(await b());
  }
  return { a: medianOf(roundsA), b: medianOf(roundsB), roundsA, roundsB };
}
