import type { Report } from './report.js';
import type { Spread } from './compare.js';
import { fixed } from './scenario.js';

/** One pair-form comparison found in a run's data: where it is, its rate and CPU ratios. */
export interface Compared {
  key: string;
  rate: Spread;
  cpu: Spread;
}

function isSpread(value: unknown): value is Spread {
  return typeof value === 'object' && value !== null && 'median' in value && 'q1' in value && 'q3' in value && 'n' in value;
}

/** Every object with `rate` and `cpu` spreads (bench/compare.ts `pairData`) in each outcome's data, by scenario and path. */
export function comparisons(report: Pick<Report, 'outcomes'>): Compared[] {
  const found: Compared[] = [];
  const walk = (value: unknown, key: string): void => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return;
    const record = value as Record<string, unknown>;
    if (isSpread(record.rate) && isSpread(record.cpu)) {
      found.push({ key, rate: record.rate, cpu: record.cpu });
      return;
    }
    for (const [name, child] of Object.entries(record)) walk(child, `${key} / ${name}`);
  };
  for (const outcome of report.outcomes) walk(outcome.data, outcome.name);
  return found;
}

/** Whether two spreads' interquartile ranges overlap: the two runs agree within their spreads. */
export function agree(a: Spread, b: Spread): boolean {
  return a.q1 <= b.q3 && b.q1 <= a.q3;
}

const cell = (s: Spread) => `${fixed(s.median, 2)} (${fixed(s.q1, 2)}–${fixed(s.q3, 2)})`;

/**
 * A markdown table of every comparison of this run beside the previous full
 * run: the median pair ratio (rate and CPU per request) and its IQR in each,
 * and whether the IQRs overlap.
 */
export function agreementTable(previous: Pick<Report, 'outcomes' | 'startedAt'>, current: Pick<Report, 'outcomes' | 'startedAt'>): string {
  const before = new Map(comparisons(previous).map((c) => [c.key, c]));
  const lines = [
    `| comparison | rate ratio, run of ${previous.startedAt} | rate ratio, this run | agree | CPU/req ratio, run of ${previous.startedAt} | CPU/req ratio, this run | agree |`,
    '|---|---|---|---|---|---|---|',
  ];
  let total = 0;
  let agreeing = 0;
  for (const now of comparisons(current)) {
    const then = before.get(now.key);
    if (then === undefined) continue;
    const rate = agree(then.rate, now.rate);
    const cpu = agree(then.cpu, now.cpu);
    total += 2;
    agreeing += Number(rate) + Number(cpu);
    lines.push(`| ${now.key.replaceAll('|', '\\|')} | ${cell(then.rate)} | ${cell(now.rate)} | ${rate ? 'yes' : 'NO'} | ${cell(then.cpu)} | ${cell(now.cpu)} | ${cpu ? 'yes' : 'NO'} |`);
  }
  return [`${agreeing} of ${total} ratios agree within their interquartile ranges (the two IQRs overlap).`, '', ...lines].join('\n');
}
