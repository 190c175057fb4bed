import { signIn } from '../../test/helpers/sign-in.js';
import { GATEWAY_NODE_FLAGS, type Gateway } from '../cast.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs, type Pair, type Target } from '../compare.js';
import { load } from '../load.js';
import { mib, MIB, signed, type Check, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/**
 * The young-generation cap (README "Memory"): `npm start` and the image run
 * `node --max-semi-space-size=N` (GATEWAY_NODE_FLAGS, read from package.json);
 * every gateway of the bench runs with it. Here a gateway with the cap and
 * one without it (V8's default, which grows the semi-spaces to 16 MiB and
 * more under load) run side by side: idle RSS after one sign-in, the hot path
 * at 50 connections and 1 MiB responses at 10 connections in pairs (A: no
 * cap, B: the cap), and RSS after the load. The cap stays the default only
 * while the hot path holds (≥ 0.97 × without it).
 */
export const semiSpace: Scenario = async ({ mode, cast, progress }) => {
  const gateways: Gateway[] = [];
  try {
    const uncapped = await cast.startGateway({ name: 'semi-space-default', nodeFlags: [] });
    gateways.push(uncapped);
    const capped = await cast.startGateway({ name: 'semi-space-capped', nodeFlags: GATEWAY_NODE_FLAGS });
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
    progress(`semi-space: hot path without and with ${GATEWAY_NODE_FLAGS.join(' ')}, ${mode.pairs} pairs`);
    const hot = await compare(SMALL_PATH, 50, 'rps');
    const afterHot = { uncapped: uncapped.child.rss(), capped: capped.child.rss() };
    progress(`semi-space: 1 MiB responses without and with ${GATEWAY_NODE_FLAGS.join(' ')}, ${mode.pairs} pairs`);
    const large = await compare(`/large?bytes=${MIB}`, 10, 'bytesPerSecond');
    const afterLarge = { uncapped: uncapped.child.rss(), capped: capped.child.rss() };
    const name = `young-generation cap (${GATEWAY_NODE_FLAGS.join(' ') || 'none'}) vs V8 default`;
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
    return { rows, checks, data: { flags: GATEWAY_NODE_FLAGS, hot: pairData(hot), large: pairData(large), rss: { idle, afterHot, afterLarge } } };
  } finally {
    for (const gateway of gateways.reverse()) await gateway.stop();
  }
};
