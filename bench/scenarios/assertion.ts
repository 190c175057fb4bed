import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { medianOf, type LoadResult } from '../load.js';
import { ASSERTION_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { measureOneGateway, SMALL_PATH } from './hot-path.js';

/** Issue #28's target: a route with an identity assertion costs at most 1.1 × the plain route's server CPU per request. */
const CPU_TARGET = 1.1;

/**
 * The hot-path cost of an identity assertion (README "Identity assertion"):
 * one gateway config with a plain route (`/`) and a route with `assertion`
 * (stripPrefix: the same upstream path), the same request measured on each
 * in the same run, 50 connections. The assertion is signed by the first
 * request (the status check before the load) and then reused from the
 * route's cache, one signature per session, route and lifetime. Each round
 * runs a fresh gateway for the plain route, then a fresh one for the
 * assertion route; medians over the rounds. The "bare proxy" column is the
 * plain route; the CPU row reports the target as met or not; only errors
 * fail the run.
 */
export const assertionHotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`assertion: round ${round + 1} of ${mode.rounds}, plain route then assertion route`);
    rounds.baseline.push(await measureOneGateway(cast, mode, { name: `assertion-plain-${round}`, assertion: true }, SMALL_PATH));
    rounds.gatehouse.push(await measureOneGateway(cast, mode, { name: `assertion-route-${round}`, assertion: true }, `${ASSERTION_PATH}${SMALL_PATH}`));
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = 'assertion route vs plain route, hot path, 50 conns';
  return { rows: pairRows(name, pair, { cpuPerRequest: CPU_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
