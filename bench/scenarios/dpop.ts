import { noErrors, pairData, pairRows } from '../compare.js';
import type { Scenario } from '../scenario.js';
import { compareGateways, SMALL_PATH } from './hot-path.js';

/** Issue #32's target: the DPoP hot path at least 0.6 × the Bearer one. */
const RPS_TARGET = 0.6;

/**
 * The hot-path cost of DPoP (README "Client authentication and
 * sender-constrained tokens"): the same request through a gateway with
 * Bearer tokens and through one with `provider.dpop: true` (one ES256 proof
 * signed per proxied request), both running, 50 connections, in pairs. The
 * "bare proxy" column is the Bearer gateway, so the ratio is DPoP over Bearer.
 */
export const dpopHotPath: Scenario = async ({ mode, cast, progress }) => {
  progress(`dpop: Bearer and DPoP gateways side by side, ${mode.pairs} pairs`);
  const pair = await compareGateways(cast, mode, { options: { name: 'dpop-bearer', dpop: false }, path: SMALL_PATH }, { options: { name: 'dpop-bound', dpop: true }, path: SMALL_PATH });
  const name = 'DPoP vs Bearer hot path, 50 conns';
  return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
