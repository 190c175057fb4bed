import { readFileSync } from 'node:fs';

/** The parts of a V8 .cpuprofile (node --cpu-prof) the analysis reads. */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Frame {
  frame: string;
  ms: number;
  /** Share of the busy (non-idle) time in the window. */
  share: number;
}

export interface ProfileSummary {
  /** Busy time in the window, ms (idle excluded). */
  busyMs: number;
  idleMs: number;
  /** Whether the load window could be located in the profile (else every sample counts). */
  windowed: boolean;
  self: Frame[];
  /** Self time grouped by where the code lives (gatehouse, a package, node internals, GC). */
  byOrigin: Frame[];
  /** Inclusive time of gatehouse's own functions (and what they call). */
  inclusive: Frame[];
}

const IDLE = new Set(['(idle)']);

/**
 * Reads a .cpuprofile and sums self time per function (and inclusive time
 * for gatehouse's own functions), counting only samples taken between
 * `fromUs` and `toUs` on the monotonic clock (process.hrtime in the driver;
 * V8 stamps samples with the same clock), so start-up and sign-in do not count.
 */
export function summarize(file: string, root: string, fromUs: number, toUs: number, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const windowed = profile.startTime < toUs && profile.endTime > fromUs;
  const self = new Map<string, number>();
  const origin = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  let at = profile.startTime;
  for (let k = 0; k < profile.samples.length; k += 1) {
    at += profile.timeDeltas[k] ?? 0;
    if (windowed && (at < fromUs || at > toUs)) continue;
    const duration = (profile.timeDeltas[k + 1] ?? profile.timeDeltas[k] ?? 0) / 1000;
    const node = byId.get(profile.samples[k]!)!;
    if (IDLE.has(node.callFrame.functionName)) {
      idle += duration;
      continue;
    }
    busy += duration;
    add(self, frameName(node.callFrame, root), duration);
    add(origin, originOf(node.callFrame, root), duration);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      if (!frame.url.includes('/dist/')) continue;
      const name = frameName(frame, root);
      if (!seen.has(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + duration);
      seen.add(name);
    }
  }
  const ranked = (map: Map<string, number>, count: number): Frame[] =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, count).map(([frame, ms]) => ({ frame, ms, share: busy > 0 ? ms / busy : 0 }));
  return { busyMs: busy, idleMs: idle, windowed, self: ranked(self, top), byOrigin: ranked(origin, 15), inclusive: ranked(inclusive, 20) };
}

function add(map: Map<string, number>, key: string, value: number): void {
  map.set(key, (map.get(key) ?? 0) + value);
}

function frameName(frame: { functionName: string; url: string; lineNumber: number }, root: string): string {
  const name = frame.functionName || '(anonymous)';
  if (frame.url === '') return name;
  return `${name} ${shortUrl(frame.url, root)}:${frame.lineNumber + 1}`;
}

function shortUrl(url: string, root: string): string {
  const path = url.replace(/^file:\/\//, '');
  return path.startsWith(root) ? path.slice(root.length) : path;
}

/** gatehouse (dist/), node_modules/<package>, node internals, or V8's own entries such as (garbage collector). */
function originOf(frame: { functionName: string; url: string }, root: string): string {
  if (frame.url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const path = shortUrl(frame.url, root);
  if (path.startsWith('dist/')) return 'gatehouse (dist/)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return pkg[1]!;
  if (path.startsWith('node:')) return 'node internals';
  return path;
}

/** Self time per request (µs) of each frame in `gatehouse` minus the same frame in `baseline`, largest first. */
export function perRequestDiff(gatehouse: { summary: ProfileSummary; requests: number }, baseline: { summary: ProfileSummary; requests: number }, top = 25) {
  const perRequest = (run: { summary: ProfileSummary; requests: number }) => new Map(run.summary.self.map((frame) => [frame.frame, (frame.ms * 1000) / run.requests]));
  const g = perRequest(gatehouse);
  const b = perRequest(baseline);
  return [...new Set([...g.keys(), ...b.keys()])]
    .map((frame) => ({ frame, gatehouse: g.get(frame) ?? 0, baseline: b.get(frame) ?? 0, delta: (g.get(frame) ?? 0) - (b.get(frame) ?? 0) }))
    .sort((x, y) => y.delta - x.delta)
    .slice(0, top);
}

/** A markdown table of frames. */
export function framesTable(title: string, frames: readonly Frame[], column = 'self ms'): string {
  const lines = [`| ${title} | ${column} | share of busy time |`, '|---|---:|---:|'];
  for (const frame of frames) lines.push(`| \`${frame.frame.replaceAll('|', '\\|')}\` | ${frame.ms.toFixed(0)} | ${(frame.share * 100).toFixed(1)} % |`);
  return lines.join('\n');
}
