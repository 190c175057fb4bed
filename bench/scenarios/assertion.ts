import { noErrors, pairData, pairRows } from '../compare.js';
import { ASSERTION_PATH } from '../cast.js';
import type { Scenario } from '../scenario.js';
import { compareGateways, SMALL_PATH } from './hot-path.js';

/** Issue #28's target: a route with an identity assertion costs at most 1.1 × the plain route's server CPU per request. */
const CPU_TARGET = 1.1;

/**
 * The hot-path cost of an identity assertion (README "Identity assertion"):
 * one gateway with a plain route (`/`) and a route with `assertion`
 * (stripPrefix: the same upstream path); the same request on each route of
 * the same process, 50 connections, in pairs. The assertion is signed by the
 * first request and then reused from the route's cache, one signature per
 * session, route and lifetime. The "bare proxy" column is the plain route.
 */
export const assertionHotPath: Scenario = async ({ mode, cast, progress }) => {
  progress(`assertion: plain route and assertion route of one gateway, ${mode.pairs} pairs`);
  const pair = await compareGateways(cast, mode, { options: { name: 'assertion', assertion: true }, path: SMALL_PATH }, { path: `${ASSERTION_PATH}${SMALL_PATH}` });
  const name = 'assertion route vs plain route, hot path, 50 conns';
  return { rows: pairRows(name, pair, { cpuPerRequest: CPU_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
