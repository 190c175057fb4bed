import { signIn } from '../../test/helpers/sign-in.js';
import { JwtIssuer } from '../../test/helpers/jwt-issuer.js';
import { noErrors, pairData, pairRows, type Pair } from '../compare.js';
import { load, medianOf, type LoadResult } from '../load.js';
import { fixed, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** Issue #27's target: a JWT request with a cached verification costs at most 1.2 × the session hot path's CPU per request. */
const CPU_TARGET = 1.2;

/**
 * The machine-client hot path (README "Machine clients"): on one gateway
 * whose route accepts `[session, bearer]`, the session hot path (a cookie,
 * a fresh token) and a JWT bearer request whose verification is cached
 * (one SHA-256 of the token, one LRU lookup, `allow`, the caller's token
 * upstream), 50 connections each, in the same run and the same process.
 * The "bare proxy" column is the session request, so the ratios are bearer
 * over session; the CPU row reports the target (≤ 1.2 ×). Reported, not
 * gated: only errors fail the run.
 */
export const bearerHotPath: Scenario = async ({ mode, cast, progress }) => {
  const issuer = await JwtIssuer.start();
  const rounds = { baseline: [] as LoadResult[], gatehouse: [] as LoadResult[] };
  try {
    for (let round = 0; round < mode.rounds; round += 1) {
      progress(`bearer: round ${round + 1} of ${mode.rounds}, session then JWT bearer on one gateway`);
      const gateway = await cast.startGateway({ name: `bearer-${round}`, bearerIssuer: issuer.url });
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
        rounds.baseline.push(await run(session, mode.duration));
        rounds.gatehouse.push(await run(bearer, mode.duration));
      } finally {
        await gateway.stop();
      }
    }
  } finally {
    await issuer.close();
  }
  const pair: Pair = { baseline: medianOf(rounds.baseline), gatehouse: medianOf(rounds.gatehouse), rounds };
  const name = 'JWT bearer (cached) vs session hot path, 50 conns';
  const rows = pairRows(name, pair);
  const cpuRatio = pair.gatehouse.cpuPerRequestUs / pair.baseline.cpuPerRequestUs;
  const cpuRow = rows.find((row) => row.metric === 'server CPU per request')!;
  cpuRow.target = `≤ ${fixed(CPU_TARGET, 1)} ×`;
  cpuRow.met = cpuRatio <= CPU_TARGET;
  return { rows, checks: [noErrors(name, pair)], data: pairData(pair) };
};
