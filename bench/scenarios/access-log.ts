import { signIn } from '../../test/helpers/sign-in.js';
import type { Gateway } from '../cast.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs, type Pair } from '../compare.js';
import { load } from '../load.js';
import { check, type Check, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** Issue #32's target: the hot path at LOG_LEVEL=info at least 0.9 × the same at warn. */
const RPS_TARGET = 0.9;

/**
 * What the access log costs: the hot path at 50 connections through three
 * gateways running side by side, LOG_LEVEL=warn, and LOG_LEVEL=info (one JSON
 * line per request) with the log going to a file and to a pipe a log
 * shipper reads (the driver); in pairs warn/info-to-a-file and
 * warn/info-to-a-pipe. Target: ≥ 0.90 × the warn figure. Every other
 * scenario runs the gateway at warn.
 */
export const accessLog: Scenario = async ({ mode, cast, progress }) => {
  const gateways: Gateway[] = [];
  try {
    const warn = await cast.startGateway({ name: 'access-log-warn', logLevel: 'warn', logTo: 'file' });
    gateways.push(warn);
    const infoFile = await cast.startGateway({ name: 'access-log-info-file', logLevel: 'info', logTo: 'file' });
    gateways.push(infoFile);
    const infoPipe = await cast.startGateway({ name: 'access-log-info-pipe', logLevel: 'info', logTo: 'pipe' });
    gateways.push(infoPipe);
    const cookies = new Map<Gateway, string>();
    for (const gateway of gateways) {
      const { cookie } = await signIn(gateway.url, { user: 'alice' });
      await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
      cookies.set(gateway, cookie);
    }
    const served = new Map<Gateway, number>(gateways.map((gateway) => [gateway, 0]));
    const run = async (gateway: Gateway, duration: number) => {
      const result = await load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration, headers: { cookie: cookies.get(gateway)! }, server: gateway.child });
      served.set(gateway, served.get(gateway)! + result.requests);
      return result;
    };
    if (mode.warmup > 0) for (const gateway of gateways) await run(gateway, mode.warmup);
    const name = 'access log: hot path, 50 conns';
    const rows: Row[] = [];
    const checks: Check[] = [];
    const data: Record<string, unknown> = {};
    for (const [gateway, sink] of [
      [infoFile, 'a file'],
      [infoPipe, 'a pipe'],
    ] as const) {
      progress(`access log: warn and info to ${sink}, ${mode.pairs} pairs`);
      const pair: Pair = summarizePairs(
        await runPairs(
          mode.pairs,
          () => run(warn, mode.duration),
          () => run(gateway, mode.duration),
        ),
      );
      const scenario = `${name}, LOG_LEVEL=warn → info to ${sink}`;
      rows.push(...pairRows(scenario, pair, { rps: RPS_TARGET }));
      checks.push(noErrors(scenario, pair));
      data[sink === 'a file' ? 'infoFile' : 'infoPipe'] = pairData(pair);
    }
    // Wait for the last buffered lines (flushed at least every 100 ms), then count: at least one line per request served.
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const [gateway, sink] of [
      [infoFile, 'a file'],
      [infoPipe, 'a pipe'],
    ] as const) {
      const lines = gateway.accessLogLines();
      checks.push(check(`${name}: access log written at info to ${sink}`, lines >= served.get(gateway)!, `${lines} "request completed" lines for ${served.get(gateway)} requests`));
      data[`accessLogLines ${sink}`] = lines;
    }
    return { rows, checks, data };
  } finally {
    for (const gateway of gateways.reverse()) await gateway.stop();
  }
};
