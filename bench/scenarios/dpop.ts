import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { medianOf, type LoadResult } from '../load.js';
import type { Scenario } from '../scenario.js';
import { measureOneGateway, SMALL_PATH } from './hot-path.js';

/**
 * The hot-path cost of DPoP (README "Client authentication and
 * sender-constrained tokens"): the same request through a gateway with
 * Bearer tokens and through one with `provider.dpop: true` (one ES256 proof
 * signed per proxied request), in the same run, 50 connections. Gateways
 * share the registered port, so each round runs a fresh Bearer gateway,
 * then a fresh DPoP one; medians over the rounds. The "bare proxy" column
 * is the Bearer gateway, so the ratio is DPoP over Bearer. Reported, not gated.
 */
export const dpopHotPath: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  for (let round = 0; round < mode.rounds; round += 1) {
    progress(`dpop: round ${round + 1} of ${mode.rounds}, Bearer then DPoP`);
    rounds.baseline.push(await measureOneGateway(cast, mode, { name: `dpop-bearer-${round}`, dpop: false }, SMALL_PATH));
    rounds.gatehouse.push(await measureOneGateway(cast, mode, { name: `dpop-bound-${round}`, dpop: true }, SMALL_PATH));
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = 'DPoP vs Bearer hot path, 50 conns';
  return { rows: pairRows(name, pair), checks: [noErrors(name, pair)], data: pairData(pair) };
};
