import { signIn } from '../../test/helpers/sign-in.js';
import { GATEWAY_NODE_FLAGS, type Gateway } from '../cast.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs, type Pair, type Target } from '../compare.js';
import { load } from '../load.js';
import { mib, MIB, signed, type Check, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** The young-generation cap README "Memory" offers through NODE_OPTIONS. */
const CAP = '--max-semi-space-size=2';

/**
 * The young-generation cap (README "Memory"): a gateway run as `npm start`
 * runs it (GATEWAY_NODE_FLAGS, V8's default young generation, which grows
 * its semi-spaces to 16 MiB and more under load) and one with the cap added
 * run side by side: idle RSS after one sign-in, the hot path at 50
 * connections and 1 MiB responses at 10 connections in pairs (A: as `npm
 * start`, B: with the cap), and RSS after the load. The cap would be the
 * default only if the hot path held (≥ 0.97 ×); it did not (BENCHMARKS.md),
 * so it is the operator's trade of CPU for memory.
 */
export const semiSpace: Scenario = async ({ mode, cast, progress }) => {
  const gateways: Gateway[] = [];
  try {
    const uncapped = await cast.startGateway({ name: 'semi-space-default', nodeFlags: GATEWAY_NODE_FLAGS });
    gateways.push(uncapped);
    const capped = await cast.startGateway({ name: 'semi-space-capped', nodeFlags: [...GATEWAY_NODE_FLAGS, CAP] });
    gateways.push(capped);
    const cookies = new Map<Gateway, string>();
    for (const gateway of gateways) {
      const { cookie } = await signIn(gateway.url, { user: 'alice' });
      await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
      cookies.set(gateway, cookie);
    }
    const idle = { uncapped: uncapped.child.rss(), capped: capped.child.rss() };
    const target = (gateway: Gateway): Target => ({ url: gateway.url, child: gateway.child });
    const compare = async (path: string, connections: number, metric: 'rps' | 'bytesPerSecond'): Promise<Pair> => {
      const run = (gateway: Gateway, seconds: number) =>
        load({ url: `${gateway.url}${path}`, connections, duration: seconds, headers: { cookie: cookies.get(gateway)! }, server: target(gateway).child });
      if (mode.warmup > 0) {
        await run(uncapped, mode.warmup);
        await run(capped, mode.warmup);
      }
      return summarizePairs(
        await runPairs(
          mode.pairs,
          () => run(uncapped, mode.duration),
          () => run(capped, mode.duration),
        ),
        metric,
      );
    };
    progress(`semi-space: hot path without and with ${CAP}, ${mode.pairs} pairs`);
    const hot = await compare(SMALL_PATH, 50, 'rps');
    const afterHot = { uncapped: uncapped.child.rss(), capped: capped.child.rss() };
    progress(`semi-space: 1 MiB responses without and with ${CAP}, ${mode.pairs} pairs`);
    const large = await compare(`/large?bytes=${MIB}`, 10, 'bytesPerSecond');
    const afterLarge = { uncapped: uncapped.child.rss(), capped: capped.child.rss() };
    const name = `young-generation cap (${CAP}) vs V8 default`;
    const rows: Row[] = [
      ...pairRows(`${name}: hot path, 50 conns`, hot, { rps: 0.97 }),
      ...pairRows(`${name}: 1 MiB responses, 10 conns`, large, {}, 'MiB/s'),
      ...(
        [
          ['idle, after one sign-in', idle],
          ['after the hot-path pairs', afterHot],
          ['after the 1 MiB pairs', afterLarge],
        ] as const
      ).map(([when, rss]) => ({
        scenario: `${name}: memory`,
        metric: `RSS ${when}`,
        baseline: mib(rss.uncapped),
        gatehouse: mib(rss.capped),
        ratio: signed((rss.capped - rss.uncapped) / MIB, 1, 'MiB'),
        target: '',
      })),
    ];
    const checks: Check[] = [noErrors(`${name}: hot path`, hot), noErrors(`${name}: 1 MiB responses`, large)];
    return { rows, checks, data: { flags: [...GATEWAY_NODE_FLAGS, CAP], hot: pairData(hot), large: pairData(large), rss: { idle, afterHot, afterLarge } } };
  } finally {
    for (const gateway of gateways.reverse()) await gateway.stop();
  }
};
