import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { medianOf, type LoadResult } from '../load.js';
import { ROUTED_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { measureOneGateway } from './hot-path.js';

/** How many routes the routed gateway has (issue #13: the hot path on the most specific of 20). */
const ROUTES = 20;
/** Issue #13's target: req/s on the most specific of 20 routes within 3 % of the one-route figure of the same run. */
const RPS_TARGET = 0.97;

/**
 * The hot-path cost of `routes` (README "Routes"): the same request through
 * the one-route form and through a gateway with 20 routes whose most
 * specific one matches (longest prefix, with an identity header), in the
 * same run, 50 connections. Each round runs a fresh one-route gateway, then a
 * fresh routed one; medians over the rounds. The "bare proxy" column is the
 * one-route gateway, so the ratio is 20 routes over one; its req/s row
 * reports the target (≥ 0.97 ×) as met or not. Reported, not gated: only
 * errors fail the run.
 */
export const routesHotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`routes: round ${round + 1} of ${mode.rounds}, one route then ${ROUTES}`);
    rounds.baseline.push(await measureOneGateway(cast, mode, { name: `routes-one-${round}` }, ROUTED_PATH));
    rounds.gatehouse.push(await measureOneGateway(cast, mode, { name: `routes-${ROUTES}-${round}`, routes: ROUTES }, ROUTED_PATH));
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = `${ROUTES} routes vs one route, hot path, 50 conns`;
  return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
