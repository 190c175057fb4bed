import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { signIn } from '../../test/helpers/sign-in.js';
import { GATEWAY_NODE_FLAGS, ROOT, startBaseline, type Cast, type GatewayOptions } from '../cast.js';
import type { Shape } from '../compare.js';
import { load } from '../load.js';
import { SERVER_CORE, type Child } from '../processes.js';
import { framesTable, perRequestDiff, summarize, type ProfileSummary } from '../profile.js';
import { check, fixed, MIB, signed, type Mode, type Row, type Scenario } from '../scenario.js';
import { seedSessions } from '../seed.js';
import { SMALL_PATH } from './hot-path.js';

const SAMPLING_US = 250;

interface Profiled {
  summary: ProfileSummary;
  requests: number;
  errors: number;
  /** Busy CPU per request on the main thread, under the profiler, µs. */
  perRequestUs: number;
}

/**
 * `node --cpu-prof` (250 µs sampling) on the hot path, for the gateway and
 * for the bare proxy under the same load, so that the frames gatehouse adds
 * stand out per request; and on the cold-session path. Only samples inside
 * the load window count. Profiles are kept in dist-bench/ (chrome://inspect).
 */
export const profile: Scenario = async ({ mode, cast, progress }) => {
  const profiler = (dir: string) => ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${SAMPLING_US}`];
  const flags = (dir: string) => [...GATEWAY_NODE_FLAGS, ...profiler(dir)];
  progress(`profile: hot path, gateway and bare proxy, ${mode.profileSeconds} s each`);
  const gatewayDir = join(cast.dir, 'profile-hot');
  const gateway = await cast.startGateway({ name: 'profile-hot', nodeFlags: flags(gatewayDir) });
  let cookie: string;
  let hot: Profiled;
  try {
    cookie = (await signIn(gateway.url, { user: 'alice' })).cookie;
    hot = await profiled(gateway.child, gateway.url, { connections: 50, headers: { cookie } }, mode, gatewayDir, 'hot-path', () => gateway.stop());
  } finally {
    await gateway.stop();
  }
  const baselineDir = join(cast.dir, 'profile-baseline');
  const baseline = await startBaseline(cast.upstreamUrl, cast.pinned ? SERVER_CORE : undefined, profiler(baselineDir));
  let base: Profiled;
  try {
    base = await profiled(baseline.child, baseline.url, { connections: 50, headers: { cookie } }, mode, baselineDir, 'bare-proxy', () => baseline.child.stop());
  } finally {
    await baseline.child.stop();
  }

  progress('profile: cold-session path');
  const cold = await profileCold(cast, mode, flags);

  // Where the targets missed elsewhere spend their time: 1 MiB responses (gateway and bare proxy), the access log at info to a pipe, DPoP.
  progress('profile: 1 MiB responses, gateway and bare proxy; access log at info to a pipe; DPoP');
  const largePath = `/large?bytes=${MIB}`;
  const streamingGateway = await profileGateway(cast, mode, flags, { name: 'streaming-1mib' }, 10, largePath);
  const streamingDir = join(cast.dir, 'profile-baseline-streaming');
  const streamingBaseline = await startBaseline(cast.upstreamUrl, cast.pinned ? SERVER_CORE : undefined, profiler(streamingDir));
  let streamingBase: Profiled;
  try {
    streamingBase = await profiled(streamingBaseline.child, streamingBaseline.url, { connections: 10, headers: { cookie } }, mode, streamingDir, 'bare-proxy-streaming-1mib', () => streamingBaseline.child.stop(), largePath);
  } finally {
    await streamingBaseline.child.stop();
  }
  const infoPipe = await profileGateway(cast, mode, flags, { name: 'access-log-info-pipe', logLevel: 'info', logTo: 'pipe' }, 50, SMALL_PATH);
  const dpopRun = await profileGateway(cast, mode, flags, { name: 'dpop', dpop: true }, 50, SMALL_PATH);
  const extra = [
    `#### 1 MiB responses, 10 connections: gateway ${fixed(streamingGateway.perRequestUs)} µs per MiB, bare proxy ${fixed(streamingBase.perRequestUs)} µs per MiB (main thread)`,
    '',
    framesTable('1 MiB responses, gateway: top frames by self time', streamingGateway.summary.self.slice(0, 20)),
    '',
    diffMarkdown(perRequestDiff(streamingGateway, streamingBase, 15), 'gatehouse', 'bare proxy', 'MiB'),
    '',
    `#### Access log at info to a pipe: ${fixed(infoPipe.perRequestUs, 1)} µs per request (the warn hot path above: ${fixed(hot.perRequestUs, 1)} µs)`,
    '',
    diffMarkdown(perRequestDiff(infoPipe, hot, 15), 'info to a pipe', 'warn'),
    '',
    `#### DPoP: ${fixed(dpopRun.perRequestUs, 1)} µs per request (Bearer, the hot path above: ${fixed(hot.perRequestUs, 1)} µs)`,
    '',
    diffMarkdown(perRequestDiff(dpopRun, hot, 15), 'DPoP', 'Bearer'),
  ];
  const diff = perRequestDiff(hot, base);
  const diffTable = [
    '| frame | gatehouse µs/req | bare proxy µs/req | Δ µs/req |',
    '|---|---:|---:|---:|',
    ...diff.map((d) => `| \`${d.frame.replaceAll('|', '\\|')}\` | ${d.gatehouse.toFixed(2)} | ${d.baseline.toFixed(2)} | ${d.delta >= 0 ? '+' : ''}${d.delta.toFixed(2)} |`),
  ].join('\n');
  const markdown = [
    `Hot path under the profiler (50 connections, ${mode.profileSeconds} s, ${SAMPLING_US} µs sampling; main thread only): gateway ${fixed(hot.perRequestUs, 1)} µs per request,`,
    `bare proxy ${fixed(base.perRequestUs, 1)} µs per request. Profiles: dist-bench/hot-path.cpuprofile, dist-bench/bare-proxy.cpuprofile, dist-bench/cold-session.cpuprofile.`,
    '',
    framesTable('Hot path, gateway: top frames by self time', hot.summary.self.slice(0, 25)),
    '',
    '#### Where the gateway spends more than the bare proxy, per request',
    '',
    diffTable,
    '',
    framesTable('Hot path, gateway: self time by origin', hot.summary.byOrigin),
    '',
    framesTable("Hot path: gatehouse's own functions, inclusive", hot.summary.inclusive, 'inclusive ms'),
    '',
    `#### Cold-session path (${fixed(mode.coldSessions)} users, cacheSize ${fixed(mode.coldCacheSize)}): ${fixed(cold.perRequestUs, 1)} µs per request on the main thread`,
    '',
    framesTable('Cold path: top frames by self time', cold.summary.self.slice(0, 20)),
    '',
    framesTable('Cold path: self time by origin', cold.summary.byOrigin),
    '',
    framesTable("Cold path: gatehouse's own functions, inclusive", cold.summary.inclusive, 'inclusive ms'),
    '',
    ...extra,
  ].join('\n');
  const rows: Row[] = [
    {
      scenario: 'profile (main thread, under the profiler)',
      metric: 'hot path CPU per request',
      baseline: `${fixed(base.perRequestUs, 1)} µs`,
      gatehouse: `${fixed(hot.perRequestUs, 1)} µs`,
      ratio: signed(hot.perRequestUs - base.perRequestUs, 1, 'µs'),
      target: '',
    },
    ...diff.slice(0, 8).map((d, rank) => ({
      scenario: 'profile: hot-path frames gatehouse adds',
      metric: `#${rank + 1} ${d.frame}`,
      baseline: `${d.baseline.toFixed(2)} µs`,
      gatehouse: `${d.gatehouse.toFixed(2)} µs`,
      ratio: signed(d.delta, 2, 'µs'),
      target: '',
    })),
    { scenario: 'profile (main thread, under the profiler)', metric: 'cold-session path CPU per request', baseline: '', gatehouse: `${fixed(cold.perRequestUs, 1)} µs`, ratio: '', target: '' },
    {
      scenario: 'profile (main thread, under the profiler)',
      metric: '1 MiB responses CPU per MiB',
      baseline: `${fixed(streamingBase.perRequestUs)} µs`,
      gatehouse: `${fixed(streamingGateway.perRequestUs)} µs`,
      ratio: signed(streamingGateway.perRequestUs - streamingBase.perRequestUs, 0, 'µs'),
      target: '',
    },
    {
      scenario: 'profile (main thread, under the profiler)',
      metric: 'hot path at warn → at info to a pipe, CPU per request',
      baseline: `${fixed(hot.perRequestUs, 1)} µs`,
      gatehouse: `${fixed(infoPipe.perRequestUs, 1)} µs`,
      ratio: signed(infoPipe.perRequestUs - hot.perRequestUs, 1, 'µs'),
      target: '',
    },
    {
      scenario: 'profile (main thread, under the profiler)',
      metric: 'hot path Bearer → DPoP, CPU per request',
      baseline: `${fixed(hot.perRequestUs, 1)} µs`,
      gatehouse: `${fixed(dpopRun.perRequestUs, 1)} µs`,
      ratio: signed(dpopRun.perRequestUs - hot.perRequestUs, 1, 'µs'),
      target: '',
    },
  ];
  return {
    rows,
    checks: [
      check(
        'profile: load ran without errors',
        [hot, base, cold, streamingGateway, streamingBase, infoPipe, dpopRun].every((run) => run.errors === 0),
        `${[hot, base, cold, streamingGateway, streamingBase, infoPipe, dpopRun].reduce((sum, run) => sum + run.errors, 0)} errors/non-2xx`,
      ),
    ],
    data: {
      hotPath: trimmed(hot),
      bareProxy: trimmed(base),
      coldSession: trimmed(cold),
      diff,
      streaming1MiB: trimmed(streamingGateway),
      bareProxyStreaming1MiB: trimmed(streamingBase),
      accessLogInfoPipe: trimmed(infoPipe),
      dpop: trimmed(dpopRun),
    },
    markdown,
  };
};

/** Keeps the top 40 self frames for results.json (the summary holds up to 1,000 for the comparison). */
function trimmed(run: Profiled): Profiled {
  return { ...run, summary: { ...run.summary, self: run.summary.self.slice(0, 40) } };
}

/** A gateway with `options` and one signed-in user, profiled under `connections` connections on `path`. */
async function profileGateway(cast: Cast, mode: Mode, flags: (dir: string) => string[], options: GatewayOptions, connections: number, path: string): Promise<Profiled> {
  const dir = join(cast.dir, `profile-${options.name}`);
  const gateway = await cast.startGateway({ ...options, nodeFlags: flags(dir) });
  try {
    const { cookie } = await signIn(gateway.url, { user: 'alice' });
    return await profiled(gateway.child, gateway.url, { connections, headers: { cookie } }, mode, dir, options.name, () => gateway.stop(), path);
  } finally {
    await gateway.stop();
  }
}

/** The frames one run spends more on than another, per request, as a markdown table. */
function diffMarkdown(diff: ReturnType<typeof perRequestDiff>, a: string, b: string, unit = 'req'): string {
  return [
    `| frame | ${a} µs/${unit} | ${b} µs/${unit} | Δ µs/${unit} |`,
    '|---|---:|---:|---:|',
    ...diff.map((d) => `| \`${d.frame.replaceAll('|', '\\|')}\` | ${d.gatehouse.toFixed(2)} | ${d.baseline.toFixed(2)} | ${d.delta >= 0 ? '+' : ''}${d.delta.toFixed(2)} |`),
  ].join('\n');
}

async function profileCold(cast: Cast, mode: Mode, flags: (dir: string) => string[]): Promise<Profiled> {
  const sqlitePath = join(cast.dir, 'cold-profile.sqlite');
  const seeded = await seedSessions(sqlitePath, mode.coldSessions, cast.sessionKey);
  const dir = join(cast.dir, 'profile-cold');
  const gateway = await cast.startGateway({ name: 'profile-cold', sqlitePath, cacheSize: mode.coldCacheSize, nodeFlags: flags(dir) });
  try {
    const cookies = Array.from({ length: seeded.count }, (_, i) => seeded.cookie(i));
    return await profiled(gateway.child, gateway.url, { connections: 50, cookies }, mode, dir, 'cold-session', () => gateway.stop());
  } finally {
    await gateway.stop();
  }
}

/** Warms up, loads for mode.profileSeconds, stops the process (which writes its profile) and summarizes the load window. */
async function profiled(child: Child, url: string, shape: Shape, mode: Mode, dir: string, name: string, stop: () => Promise<void>, path = SMALL_PATH): Promise<Profiled> {
  if (mode.warmup > 0) await load({ ...shape, url: `${url}${path}`, duration: mode.warmup });
  const from = Number(process.hrtime.bigint() / 1000n);
  const result = await load({ ...shape, url: `${url}${path}`, duration: mode.profileSeconds, server: child });
  const to = Number(process.hrtime.bigint() / 1000n);
  await stop();
  const file = readdirSync(dir).find((entry) => entry.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`node --cpu-prof wrote no profile into ${dir}`);
  mkdirSync(join(ROOT, 'dist-bench'), { recursive: true });
  copyFileSync(join(dir, file), join(ROOT, 'dist-bench', `${name}.cpuprofile`));
  const summary = summarize(join(dir, file), ROOT, from, to, 1000);
  return { summary, requests: result.requests, errors: result.errors, perRequestUs: (summary.busyMs * 1000) / Math.max(1, result.requests) };
}
