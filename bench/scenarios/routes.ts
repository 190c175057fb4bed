import { noErrors, pairData, pairRows } from '../compare.js';
import { ROUTED_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { compareGateways } from './hot-path.js';

/** How many routes the routed gateway has (issue #13: the hot path on the most specific of 20). */
const ROUTES = 20;
/** Issue #13's target: req/s on the most specific of 20 routes within 3 % of the one-route figure of the same run. */
const RPS_TARGET = 0.97;

/**
 * The hot-path cost of `routes` (README "Routes"): the same request through
 * the one-route form and through a gateway with 20 routes whose most
 * specific one matches (longest prefix, with an identity header), both
 * running, 50 connections, in pairs. The "bare proxy" column is the
 * one-route gateway, so the ratio is 20 routes over one.
 */
export const routesHotPath: Scenario = async ({ mode, cast, progress }) => {
  progress(`routes: one route and ${ROUTES} routes side by side, ${mode.pairs} pairs`);
  const pair = await compareGateways(cast, mode, { options: { name: 'routes-one' }, path: ROUTED_PATH }, { options: { name: `routes-${ROUTES}`, routes: ROUTES }, path: ROUTED_PATH });
  const name = `${ROUTES} routes vs one route, hot path, 50 conns`;
  return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
