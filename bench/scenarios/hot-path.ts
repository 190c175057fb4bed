import { signIn } from '../../test/helpers/sign-in.js';
import { gcSeconds, startBaseline, type Cast, type GatewayOptions } from '../cast.js';
import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { load, median, medianOf, type LoadResult } from '../load.js';
import { SERVER_CORE } from '../processes.js';
import { fixed, mib, MIB, type Check, type Mode, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';

/** A small JSON route of the bench upstream. */
export const SMALL_PATH = '/api/data';
const CONNECTIONS = [50, 200];

/**
 * Hot path: one signed-in user whose session is in the LRU and whose token
 * is fresh, ~100 bytes of JSON, at 50 and 200 connections, against the bare
 * proxy. Two processes of the same program differ by up to ±10 % (JIT,
 * memory layout), so every round starts a fresh bare proxy and a fresh
 * gateway, warms both up, then measures A B at 50 and A B at 200
 * connections; medians over the rounds. Targets (issue #17): req/s ≥ 0.95 ×
 * and p99 ≤ +1 ms at 50 and 200 connections. The gateway's GC time per
 * request comes from its own /metrics. Idle RSS: both fresh processes after
 * the gateway's one sign-in, before any load; target ≤ the bare proxy's + 15 MiB.
 */
export const hotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = new Map(CONNECTIONS.map((connections) => [connections, { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] }]));
  const gcPerRequestUs: number[] = [];
  const idleRss = { baseline: [] as number[], gatehouse: [] as number[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`hot path: round ${round + 1} of ${mode.rounds}, fresh bare proxy and gateway`);
    const baseline = await startBaseline(cast.upstreamUrl, cast.pinned ? SERVER_CORE : undefined);
    const gateway = await cast.startGateway({ name: `hot-path-${round}` });
    try {
      const { cookie } = await signIn(gateway.url, { user: 'alice' });
      await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
      await expectStatus(`${baseline.url}${SMALL_PATH}`, cookie);
      idleRss.baseline.push(baseline.child.rss());
      idleRss.gatehouse.push(gateway.child.rss());
      const run = (url: string, server: typeof baseline.child, connections: number, duration: number) =>
        load({ url: `${url}${SMALL_PATH}`, connections, duration, headers: { cookie }, server });
      if (mode.warmup > 0) {
        await run(baseline.url, baseline.child, 50, mode.warmup);
        await run(gateway.url, gateway.child, 50, mode.warmup);
      }
      for (const connections of CONNECTIONS) {
        const measured = rounds.get(connections)!;
        measured.baseline.push(await run(baseline.url, baseline.child, connections, mode.duration));
        const gcBefore = await gcSeconds(gateway);
        const result = await run(gateway.url, gateway.child, connections, mode.duration);
        if (connections === 50) gcPerRequestUs.push((((await gcSeconds(gateway)) - gcBefore) / result.requests) * 1e6);
        measured.gatehouse.push(result);
      }
    } finally {
      await gateway.stop();
      await baseline.child.stop();
    }
  }
  const rows: Row[] = [];
  const checks: Check[] = [];
  const data: Record<string, unknown> = { gcPerRequestUs, idleRss };
  for (const connections of CONNECTIONS) {
    const measured = rounds.get(connections)!;
    const pair: Pair = { baseline: medianOf(measured.baseline), gatehouse: medianOf(measured.gatehouse), rounds: measured };
    const name = `hot path, ${connections} conns`;
    rows.push(...pairRows(name, pair, { rps: 0.95, p99PlusMs: 1 }));
    checks.push(noErrors(name, pair));
    data[`connections${connections}`] = pairData(pair);
  }
  rows.splice(5, 0, {
    scenario: 'hot path, 50 conns',
    metric: 'gateway GC time per request (its own /metrics)',
    baseline: '',
    gatehouse: `${fixed(median(gcPerRequestUs), 1)} µs`,
    ratio: '',
    target: '',
  });
  const idle = { baseline: median(idleRss.baseline), gatehouse: median(idleRss.gatehouse) };
  rows.push({
    scenario: 'idle (fresh processes, one sign-in)',
    metric: 'RSS',
    baseline: mib(idle.baseline),
    gatehouse: mib(idle.gatehouse),
    ratio: `+${mib(idle.gatehouse - idle.baseline)}`,
    target: '≤ +15 MiB',
    met: idle.gatehouse - idle.baseline <= 15 * MIB,
  });
  return { rows, checks, data };
};

/**
 * One fresh gateway with `options`, one signed-in user, GET `path` at 50
 * connections (warmed up first): what the same-run comparisons of gateway
 * settings (DPoP, routes) measure, each round on its own gateway.
 */
export async function measureOneGateway(cast: Cast, mode: Mode, options: GatewayOptions, path: string): Promise<LoadResult> {
  const gateway = await cast.startGateway(options);
  try {
    const { cookie } = await signIn(gateway.url, { user: 'alice' });
    await expectStatus(`${gateway.url}${path}`, cookie);
    const run = (seconds: number) => load({ url: `${gateway.url}${path}`, connections: 50, duration: seconds, headers: { cookie }, server: gateway.child });
    if (mode.warmup > 0) await run(mode.warmup);
    return await run(mode.duration);
  } finally {
    await gateway.stop();
  }
}
