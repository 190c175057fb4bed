import { signIn } from '../../test/helpers/sign-in.js';
import { JwtIssuer } from '../../test/helpers/jwt-issuer.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs, type Pair } from '../compare.js';
import { load } from '../load.js';
import type { Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** Issue #27's target: a JWT request with a cached verification costs at most 1.2 × the session hot path's CPU per request. */
const CPU_TARGET = 1.2;

/**
 * The machine-client hot path (README "Machine clients"): on one gateway
 * whose route accepts `[session, bearer]`, the session hot path (a cookie,
 * a fresh token) and a JWT bearer request whose verification is cached
 * (one SHA-256 of the token, one LRU lookup, `allow`, the caller's token
 * upstream), 50 connections each, on the same process, in pairs.
 * The "bare proxy" column is the session request, so the ratios are bearer
 * over session; the CPU row reports the target (≤ 1.2 ×).
 */
export const bearerHotPath: Scenario = async ({ mode, cast, progress }) => {
  const issuer = await JwtIssuer.start();
  let pair: Pair;
  try {
    progress(`bearer: session and JWT bearer on one gateway, ${mode.pairs} pairs`);
    const gateway = await cast.startGateway({ name: 'bearer', bearerIssuer: issuer.url });
    try {
      const { cookie } = await signIn(gateway.url, { user: 'alice' });
      const token = await issuer.sign({ sub: 'system:serviceaccount:bench:loader', aud: 'gatehouse', exp: Math.floor(Date.now() / 1000) + 3600 });
      const session = { cookie };
      const bearer = { authorization: `Bearer ${token}` };
      await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
      const answer = await fetch(`${gateway.url}${SMALL_PATH}`, { headers: bearer });
      if (answer.status !== 200) throw new Error(`the bearer request answered ${answer.status}`);
      await answer.arrayBuffer();
      const run = (headers: Record<string, string>, seconds: number) =>
        load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration: seconds, headers, server: gateway.child });
      if (mode.warmup > 0) {
        await run(session, mode.warmup);
        await run(bearer, mode.warmup);
      }
      pair = summarizePairs(
        await runPairs(
          mode.pairs,
          () => run(session, mode.duration),
          () => run(bearer, mode.duration),
        ),
      );
    } finally {
      await gateway.stop();
    }
  } finally {
    await issuer.close();
  }
  const name = 'JWT bearer (cached) vs session hot path, 50 conns';
  return { rows: pairRows(name, pair, { cpuPerRequest: CPU_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
};
