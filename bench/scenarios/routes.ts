import { signIn } from '../../test/helpers/sign-in.js';
import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { load, medianOf, type LoadResult } from '../load.js';
import { ROUTED_PATH, type Cast } from '../cast.js';
import type { Mode, Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';

/** How many routes the routed gateway has (issue #13: the hot path on the most specific of 20). */
const ROUTES = 20;

/**
 * The hot-path cost of `routes` (README "Routes"): the same request through
 * the one-route form and through a gateway with 20 routes whose most
 * specific one matches (longest prefix, with an identity header), in the
 * same run, 50 connections. Each round runs a fresh one-route gateway, then a
 * fresh routed one; medians over the rounds. The "bare proxy" column is the
 * one-route gateway, so the ratio is 20 routes over one. Reported, not gated.
 */
export const routesHotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`routes: round ${round + 1} of ${mode.rounds}, one route then ${ROUTES}`);
    rounds.baseline.push(await measure(cast, mode, `routes-one-${round}`, undefined));
    rounds.gatehouse.push(await measure(cast, mode, `routes-${ROUTES}-${round}`, ROUTES));
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = `${ROUTES} routes vs one route, hot path, 50 conns`;
  return { rows: pairRows(name, pair), checks: [noErrors(name, pair)], data: pairData(pair) };
};

async function measure(cast: Cast, mode: Mode, name: string, routes: number | undefined): Promise<LoadResult> {
  const gateway = await cast.startGateway({ name, ...(routes === undefined ? {} : { routes }) });
  try {
    const { cookie } = await signIn(gateway.url, { user: 'alice' });
    await expectStatus(`${gateway.url}${ROUTED_PATH}`, cookie);
    const run = (seconds: number) => load({ url: `${gateway.url}${ROUTED_PATH}`, connections: 50, duration: seconds, headers: { cookie }, server: gateway.child });
    if (mode.warmup > 0) await run(mode.warmup);
    return await run(mode.duration);
  } finally {
    await gateway.stop();
  }
}
