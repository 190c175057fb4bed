import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { medianOf, type LoadResult } from '../load.js';
import { TARGET_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { measureOneGateway, SMALL_PATH } from './hot-path.js';

/** Issue #26's target: a route with a fresh cached target token costs no more than the plain route's hot path. */
const RPS_TARGET = 0.97;

/**
 * The hot-path cost of a token target (README "A token for each API"): one
 * gateway config with a plain route (`/`, the sign-in token) and a route with
 * a `resource` target (stripPrefix: the same upstream path), the same request measured on each in the same run, 50
 * connections. The target's token is obtained by the first request (the
 * status check before the load) and then served from the sealed record in
 * the cache, as a plain route's sign-in token is. Each round runs a fresh
 * gateway for the plain route, then a fresh one for the target route;
 * medians over the rounds. The "bare proxy" column is the plain route, so the
 * ratio is target route over plain route; reported, not gated: only errors
 * fail the run.
 */
export const tokenTargetHotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`token target: round ${round + 1} of ${mode.rounds}, plain route then target route`);
    rounds.baseline.push(await measureOneGateway(cast, mode, { name: `target-plain-${round}`, tokenTarget: true }, SMALL_PATH));
    rounds.gatehouse.push(await measureOneGateway(cast, mode, { name: `target-route-${round}`, tokenTarget: true }, `${TARGET_PATH}${SMALL_PATH}`));
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = 'target route vs plain route, hot path, 50 conns';
  return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
