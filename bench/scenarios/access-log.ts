import { signIn } from '../../test/helpers/sign-in.js';
import { load, medianOf, type LoadResult } from '../load.js';
import { check, fixed, ms, ratio, signed, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** The gateway at warn, and at info with its log going to a file and to a pipe (a log shipper's), as run in production. */
const SETUPS = [
  { key: 'warn', logLevel: 'warn', logTo: 'file' },
  { key: 'infoFile', logLevel: 'info', logTo: 'file' },
  { key: 'infoPipe', logLevel: 'info', logTo: 'pipe' },
] as const;

/**
 * What the access log costs: the hot path at 50 connections through a
 * gateway at LOG_LEVEL=warn and at LOG_LEVEL=info (one JSON line per
 * request), the log going to a file and to a pipe the driver reads; a fresh
 * process of each per round, in turn. Target: ≥ 0.90 × the warn figure.
 * Every other scenario runs the gateway at warn.
 */
export const accessLog: Scenario = async ({ mode, cast, progress }) => {
  const rounds = { warn: [] as LoadResult[], infoFile: [] as LoadResult[], infoPipe: [] as LoadResult[] };
  const logLines = { infoFile: 0, infoPipe: 0 };
  for (let round = 0; round < mode.rounds; round += 1) {
    for (const { key, logLevel, logTo } of SETUPS) {
      progress(`access log: round ${round + 1} of ${mode.rounds}, LOG_LEVEL=${logLevel}, to a ${logTo}`);
      const gateway = await cast.startGateway({ name: `access-log-${key}-${round}`, logLevel, logTo });
      try {
        const { cookie } = await signIn(gateway.url, { user: 'alice' });
        await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
        const run = (duration: number) => load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration, headers: { cookie }, server: gateway.child });
        if (mode.warmup > 0) await run(mode.warmup);
        rounds[key].push(await run(mode.duration));
      } finally {
        await gateway.stop();
      }
      if (key !== 'warn') logLines[key] += gateway.logText().split('\n').filter((line) => line.includes('"request completed"')).length;
    }
  }
  const warn = medianOf(rounds.warn);
  const name = 'access log: hot path, 50 conns';
  const rows: Row[] = [];
  for (const [key, sink] of [
    ['infoFile', 'a file'],
    ['infoPipe', 'a pipe'],
  ] as const) {
    const info = medianOf(rounds[key]);
    rows.push(
      {
        scenario: name,
        metric: `req/s, LOG_LEVEL=warn → info to ${sink}`,
        baseline: fixed(warn.rps),
        gatehouse: fixed(info.rps),
        ratio: ratio(info.rps / warn.rps),
        target: '≥ 0.90 ×',
        met: info.rps / warn.rps >= 0.9,
      },
      {
        scenario: name,
        metric: `server CPU per request, warn → info to ${sink}`,
        baseline: `${fixed(warn.cpuPerRequestUs, 1)} µs`,
        gatehouse: `${fixed(info.cpuPerRequestUs, 1)} µs`,
        ratio: signed(info.cpuPerRequestUs - warn.cpuPerRequestUs, 1, 'µs'),
        target: '',
      },
      { scenario: name, metric: `p99 latency, warn → info to ${sink}`, baseline: ms(warn.p99), gatehouse: ms(info.p99), ratio: signed(info.p99 - warn.p99, 2, 'ms'), target: '' },
    );
  }
  const errors = Object.values(rounds).flat().reduce((sum, result) => sum + result.errors, 0);
  // Warm-up requests are logged too, so there are at least as many lines as measured requests.
  const written = (['infoFile', 'infoPipe'] as const).map((key) => {
    const served = rounds[key].reduce((sum, result) => sum + result.requests, 0);
    return check(`${name}: access log written at info to ${key === 'infoFile' ? 'a file' : 'a pipe'}`, logLines[key] >= served, `${logLines[key]} "request completed" lines for ${served} measured requests`);
  });
  return {
    rows,
    checks: [check(`${name}: no errors`, errors === 0, `${errors} errors/non-2xx`), ...written],
    data: { warn, infoFile: medianOf(rounds.infoFile), infoPipe: medianOf(rounds.infoPipe), rounds, accessLogLines: logLines },
  };
};
