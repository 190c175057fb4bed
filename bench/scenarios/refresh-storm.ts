import { signIn } from '../../test/helpers/sign-in.js';
import { burst } from '../burst.js';
import type { Cast } from '../cast.js';
import type { LoadResult } from '../load.js';
import { sleep } from '../processes.js';
import { check, fixed, ms, signed, type Row, type Scenario } from '../scenario.js';
import { SMALL_PATH } from './hot-path.js';

/** Access tokens issued at sign-in live this long in the refresh scenarios; refreshed ones live an hour. */
export const SHORT_TTL_SECONDS = 2;
/** Margin past the expiry before the burst, for clock granularity. */
export const EXPIRY_MARGIN_MS = 150;

/**
 * Refresh storm: one user's access token has just expired (tokens.refreshSkew
 * 0, so "stale" means expired) and `stormRequests` requests of that user
 * arrive at once, one per connection (opened beforehand). Exactly one
 * refresh grant must reach the AS (counted by the AS itself), with no error.
 */
export const refreshStorm: Scenario = async ({ mode, cast, progress }) => {
  const gateway = await cast.startGateway({ name: 'refresh-storm', refreshSkew: 0 });
  try {
    const n = mode.stormRequests;
    await warmUpBursts(cast, gateway.url, n, mode.burstWarmups);
    progress(`refresh storm: ${n} concurrent requests of one user`);
    cast.ttl.login = SHORT_TTL_SECONDS;
    const { cookie } = await signIn(gateway.url, { user: 'storm' });
    const signedIn = Date.now();
    const cookies = Array<string>(n).fill(cookie);
    const base = await burst(`${cast.baselineUrl}${SMALL_PATH}`, cookies, cast.baseline);
    await sleep(Math.max(0, signedIn + SHORT_TTL_SECONDS * 1000 + EXPIRY_MARGIN_MS - Date.now()));
    const before = { ...cast.as.grants };
    const storm = await burst(`${gateway.url}${SMALL_PATH}`, cookies, gateway.child);
    const grants = cast.as.grants.refreshToken - before.refreshToken;
    const grantErrors = cast.as.grants.refreshTokenErrors - before.refreshTokenErrors;
    const name = `refresh storm (${fixed(n)} concurrent, 1 user)`;
    const rows: Row[] = [
      { scenario: name, metric: 'refresh grants at the AS', baseline: '', gatehouse: String(grants), ratio: '', target: 'exactly 1', met: grants === 1 },
      { scenario: name, metric: 'errors / non-2xx', baseline: String(base.errors), gatehouse: String(storm.errors), ratio: '', target: '0', met: storm.errors === 0 },
      ...burstRows(name, base, storm),
    ];
    return {
      rows,
      checks: [
        check(`${name}: exactly one refresh grant`, grants === 1, `${grants} refresh grants, ${grantErrors} failed`),
        check(`${name}: every request answered 2xx`, storm.errors === 0 && storm.requests === n, `${storm.requests} answered, ${storm.errors} errors/non-2xx`),
      ],
      data: { requests: n, refreshGrants: grants, refreshGrantErrors: grantErrors, baseline: base, gatehouse: storm },
    };
  } finally {
    cast.ttl.login = 3600;
    await gateway.stop();
  }
};

/**
 * A burst's first run on fresh processes is several times slower (new
 * connections' code paths are not compiled yet), so both the bare proxy and
 * the gateway get `rounds` bursts of `n` first, the gateway's with a user whose
 * token lives an hour (signed in before the short-lived ones).
 */
export async function warmUpBursts(cast: Cast, gatewayUrl: string, n: number, rounds: number): Promise<void> {
  cast.ttl.login = 3600;
  const { cookie } = await signIn(gatewayUrl, { user: 'warm-up' });
  const cookies = Array<string>(n).fill(cookie);
  for (let round = 0; round < rounds; round += 1) {
    await burst(`${cast.baselineUrl}${SMALL_PATH}`, cookies);
    await burst(`${gatewayUrl}${SMALL_PATH}`, cookies);
  }
}

/** p50, p99 and duration of a burst, beside the same burst against the bare proxy. */
export function burstRows(scenario: string, base: LoadResult, measured: LoadResult): Row[] {
  return [
    { scenario, metric: 'burst p50 latency', baseline: ms(base.p50), gatehouse: ms(measured.p50), ratio: '', target: '' },
    { scenario, metric: 'burst p99 latency', baseline: ms(base.p99), gatehouse: ms(measured.p99), ratio: signed(measured.p99 - base.p99, 2, 'ms'), target: '' },
    { scenario, metric: 'burst duration', baseline: ms(base.seconds * 1000), gatehouse: ms(measured.seconds * 1000), ratio: '', target: '' },
  ];
}
