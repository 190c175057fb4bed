import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { signIn } from '../../test/helpers/sign-in.js';
import type { Pair } from '../compare.js';
import { load, medianOf, type LoadResult } from '../load.js';
import { check, fixed, ms, ratio, signed, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

const LEVELS = ['warn', 'info'] as const;

/**
 * What the access log costs: the hot path at 50 connections through a
 * gateway at LOG_LEVEL=warn and one at LOG_LEVEL=info (one JSON line per
 * request, to a file), a fresh process of each per round, alternating.
 * Every other scenario runs the gateway at warn.
 */
export const accessLog: Scenario = async ({ mode, cast, progress, earlier }) => {
  const rounds = { warn: [] as LoadResult[], info: [] as LoadResult[] };
  let logLines = 0;
  for (let round = 0; round < mode.rounds; round += 1) {
    for (const level of LEVELS) {
      progress(`access log: round ${round + 1} of ${mode.rounds}, LOG_LEVEL=${level}`);
      const gateway = await cast.startGateway({ name: `access-log-${level}-${round}`, logLevel: level });
      try {
        const { cookie } = await signIn(gateway.url, { user: 'alice' });
        await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
        const run = (duration: number) => load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration, headers: { cookie }, server: gateway.child });
        if (mode.warmup > 0) await run(mode.warmup);
        rounds[level].push(await run(mode.duration));
      } finally {
        await gateway.stop();
      }
      if (level === 'info') {
        logLines += readFileSync(join(gateway.dir, 'gateway.log'), 'utf8').split('\n').filter((line) => line.includes('"request completed"')).length;
      }
    }
  }
  const warn = medianOf(rounds.warn);
  const info = medianOf(rounds.info);
  const bare = (earlier.get('hot path')?.data.connections50 as Pair | undefined)?.baseline;
  const name = 'access log: hot path, 50 conns';
  const rows: Row[] = [
    { scenario: name, metric: 'req/s, LOG_LEVEL=warn → info', baseline: fixed(warn.rps), gatehouse: fixed(info.rps), ratio: ratio(info.rps / warn.rps), target: '' },
    {
      scenario: name,
      metric: 'server CPU per request, warn → info',
      baseline: `${fixed(warn.cpuPerRequestUs, 1)} µs`,
      gatehouse: `${fixed(info.cpuPerRequestUs, 1)} µs`,
      ratio: signed(info.cpuPerRequestUs - warn.cpuPerRequestUs, 1, 'µs'),
      target: '',
    },
    { scenario: name, metric: 'p99 latency, warn → info', baseline: ms(warn.p99), gatehouse: ms(info.p99), ratio: signed(info.p99 - warn.p99, 2, 'ms'), target: '' },
  ];
  if (bare) {
    rows.push({
      scenario: name,
      metric: 'req/s at info vs the hot path bare proxy',
      baseline: fixed(bare.rps),
      gatehouse: fixed(info.rps),
      ratio: ratio(info.rps / bare.rps),
      target: '≥ 0.90 ×',
      met: info.rps / bare.rps >= 0.9,
    });
  }
  const served = rounds.info.reduce((sum, result) => sum + result.requests, 0);
  const errors = [...rounds.warn, ...rounds.info].reduce((sum, result) => sum + result.errors, 0);
  return {
    rows,
    checks: [
      check(`${name}: no errors`, errors === 0, `${errors} errors/non-2xx`),
      // Warm-up requests are logged too, so there are at least as many lines as measured requests.
      check(`${name}: access log written at info`, logLines >= served, `${logLines} "request completed" lines for ${served} measured requests`),
    ],
    data: { warn, info, rounds, accessLogLines: logLines },
  };
};
