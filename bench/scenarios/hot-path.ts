import { signIn } from '../../test/helpers/sign-in.js';
import { gcSeconds, startBaseline, type Cast, type Gateway, type GatewayOptions } from '../cast.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs, type Pair, type PairRun, type Target } from '../compare.js';
import { load, median } from '../load.js';
import { SERVER_CORE } from '../processes.js';
import { fixed, mib, MIB, type Check, type Mode, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';

/** A small JSON route of the bench upstream. */
export const SMALL_PATH = '/api/data';
const CONNECTIONS = [50, 200];

/**
 * Hot path: one signed-in user whose session is in the LRU and whose token
 * is fresh, ~100 bytes of JSON, at 50 and 200 connections, against the bare
 * proxy, in pair form: bare proxy and gateway back to back, the order
 * alternating, `mode.pairs` pairs at each connection count; the ratio is the
 * median of the per-pair ratios. Two processes of the same program differ by
 * several % (JIT, memory layout), so the pairs are spread over
 * `mode.generations` fresh process pairs. Targets (issue #17): req/s ≥ 0.95 ×
 * and p99 ≤ +1 ms at 50 and 200 connections. The gateway's GC time per
 * request comes from its own /metrics. Idle RSS: both fresh processes after
 * the gateway's one sign-in, before any load; target ≤ the bare proxy's + 15 MiB.
 */
export const hotPath: Scenario = async ({ mode, cast, progress }) => {
  const series = new Map(CONNECTIONS.map((connections) => [connections, [] as PairRun[]]));
  const gcPerRequestUs: number[] = [];
  const idleRss = { baseline: [] as number[], gatehouse: [] as number[] };
  const perGeneration = Math.ceil(mode.pairs / mode.generations);
  for (let generation = 0; generation < mode.generations; generation += 1) {
    progress(`hot path: process pair ${generation + 1} of ${mode.generations}, fresh bare proxy and gateway, ${perGeneration} pairs at ${CONNECTIONS.join(' and ')} connections`);
    const baseline = await startBaseline(cast.upstreamUrl, cast.pinned ? SERVER_CORE : undefined);
    const gateway = await cast.startGateway({ name: `hot-path-${generation}` });
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
        const pairs = await runPairs(
          perGeneration,
          () => run(baseline.url, baseline.child, connections, mode.duration),
          async () => {
            const gcBefore = await gcSeconds(gateway);
            const result = await run(gateway.url, gateway.child, connections, mode.duration);
            if (connections === 50) gcPerRequestUs.push((((await gcSeconds(gateway)) - gcBefore) / result.requests) * 1e6);
            return result;
          },
          generation,
        );
        series.get(connections)!.push(...pairs);
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
    const pair = summarizePairs(series.get(connections)!);
    const name = `hot path, ${connections} conns`;
    rows.push(...pairRows(name, pair, { rps: 0.95, p99PlusMs: 1 }));
    checks.push(noErrors(name, pair));
    data[`connections${connections}`] = pairData(pair);
  }
  rows.splice(4, 0, {
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
    metric: `RSS (median of ${idleRss.gatehouse.length} process pairs)`,
    baseline: mib(idle.baseline),
    gatehouse: mib(idle.gatehouse),
    ratio: `+${mib(idle.gatehouse - idle.baseline)}`,
    target: '≤ +15 MiB',
    met: idle.gatehouse - idle.baseline <= 15 * MIB,
  });
  return { rows, checks, data };
};

/** One side of a two-configuration comparison: the gateway options and the path requested on it. */
export interface Side {
  options: GatewayOptions;
  path: string;
}

/**
 * Two gateways of different configurations (or one, when `b.options` is
 * omitted: two routes of the same gateway) running side by side, each with a
 * signed-in user, GET `path` at 50 connections, warmed up, then
 * `mode.pairs` pairs A/B in alternating order. What the comparisons of
 * gateway settings (DPoP, routes, a token target, an assertion, the access
 * log, sites) measure.
 */
export async function compareGateways(cast: Cast, mode: Mode, a: Side, b: { options?: GatewayOptions; path: string }, connections = 50): Promise<Pair> {
  const gatewayA = await cast.startGateway(a.options);
  let gatewayB: Gateway | undefined;
  try {
    gatewayB = b.options === undefined ? gatewayA : await cast.startGateway(b.options);
    const { cookie: cookieA } = await signIn(gatewayA.url, { user: 'alice' });
    const cookieB = gatewayB === gatewayA ? cookieA : (await signIn(gatewayB.url, { user: 'alice' })).cookie;
    await expectStatus(`${gatewayA.url}${a.path}`, cookieA);
    await expectStatus(`${gatewayB.url}${b.path}`, cookieB);
    const targetA: Target = { url: gatewayA.url, child: gatewayA.child };
    const targetB: Target = { url: gatewayB.url, child: gatewayB.child };
    const run = (target: Target, path: string, cookie: string, seconds: number) =>
      load({ url: `${target.url}${path}`, connections, duration: seconds, headers: { cookie }, server: target.child });
    if (mode.warmup > 0) {
      await run(targetA, a.path, cookieA, mode.warmup);
      await run(targetB, b.path, cookieB, mode.warmup);
    }
    return summarizePairs(
      await runPairs(
        mode.pairs,
        () => run(targetA, a.path, cookieA, mode.duration),
        () => run(targetB, b.path, cookieB, mode.duration),
      ),
    );
  } finally {
    if (gatewayB !== undefined && gatewayB !== gatewayA) await gatewayB.stop();
    await gatewayA.stop();
  }
}
