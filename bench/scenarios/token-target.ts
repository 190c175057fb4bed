import { noErrors, pairData, pairRows } from '../compare.js';
import { TARGET_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { compareGateways, SMALL_PATH } from './hot-path.js';

/** Issue #26's target: a route with a fresh cached target token costs no more than the plain route's hot path. */
const RPS_TARGET = 0.97;

/**
 * The hot-path cost of a token target (README "A token for each API"): one
 * gateway with a plain route (`/`, the sign-in token) and a route with a
 * `resource` target (stripPrefix: the same upstream path); the same request
 * on each route of the same process, 50 connections, in pairs. The target's
 * token is obtained by the first request (the status check before the load)
 * and then served from the sealed record in the cache. The "bare proxy"
 * column is the plain route, so the ratio is target route over plain route.
 */
export const tokenTargetHotPath: Scenario = async ({ mode, cast, progress }) => {
  progress(`token target: plain route and target route of one gateway, ${mode.pairs} pairs`);
  const pair = await compareGateways(cast, mode, { options: { name: 'token-target', tokenTarget: true }, path: SMALL_PATH }, { path: `${TARGET_PATH}${SMALL_PATH}` });
  const name = 'target route vs plain route, hot path, 50 conns';
  return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
