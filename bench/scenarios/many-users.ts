import { burst } from '../burst.js';
import { sleep } from '../processes.js';
import { check, fixed, type Row, type Scenario } from '../scenario.js';
import { signInUsers } from '../users.js';
import { SMALL_PATH } from './hot-path.js';
import { burstRows, EXPIRY_MARGIN_MS, SHORT_TTL_SECONDS, warmUpBursts } from './refresh-storm.js';

/**
 * Many users refreshing: `mode.users` users signed in for real through the
 * AS, with access tokens of SHORT_TTL_SECONDS, all expired by the time the
 * last one has signed in; then one request per user, all at once. Every
 * request needs its own refresh grant: refreshes per second and errors (0).
 */
export const manyUsers: Scenario = async ({ mode, cast, progress }) => {
  const gateway = await cast.startGateway({ name: 'many-users', refreshSkew: 0 });
  try {
    const n = mode.users;
    await warmUpBursts(cast, gateway.url, n, mode.burstWarmups);
    cast.ttl.login = SHORT_TTL_SECONDS;
    progress(`many users: signing ${n} users in`);
    const signInStarted = Date.now();
    const cookies = await signInUsers(gateway.url, 'user', n);
    const signedIn = Date.now();
    const signInSeconds = (signedIn - signInStarted) / 1000;
    await sleep(Math.max(0, signedIn + SHORT_TTL_SECONDS * 1000 + EXPIRY_MARGIN_MS - Date.now()));
    progress(`many users: ${n} expired users at once`);
    const base = await burst(`${cast.baselineUrl}${SMALL_PATH}`, cookies, cast.baseline);
    const before = { ...cast.as.grants };
    const refreshing = await burst(`${gateway.url}${SMALL_PATH}`, cookies, gateway.child);
    const grants = cast.as.grants.refreshToken - before.refreshToken;
    const grantErrors = cast.as.grants.refreshTokenErrors - before.refreshTokenErrors;
    const perSecond = grants / refreshing.seconds;
    const name = `many users refreshing (${fixed(n)} users)`;
    const rows: Row[] = [
      { scenario: name, metric: 'sign-ins (real, through the AS)', baseline: '', gatehouse: `${fixed(n / signInSeconds, 1)} /s`, ratio: '', target: '' },
      { scenario: name, metric: 'refresh grants at the AS', baseline: '', gatehouse: String(grants), ratio: '', target: `exactly ${n}`, met: grants === n },
      { scenario: name, metric: 'refreshes per second', baseline: '', gatehouse: fixed(perSecond, 1), ratio: '', target: '' },
      {
        scenario: name,
        metric: 'server CPU per request, core busy (the AS shares the driver core)',
        baseline: `${fixed(base.cpuPerRequestUs)} µs, ${fixed(base.serverBusy * 100)} %`,
        gatehouse: `${fixed(refreshing.cpuPerRequestUs)} µs, ${fixed(refreshing.serverBusy * 100)} %`,
        ratio: '',
        target: '',
      },
      { scenario: name, metric: 'errors / non-2xx', baseline: String(base.errors), gatehouse: String(refreshing.errors), ratio: '', target: '0', met: refreshing.errors === 0 },
      ...burstRows(name, base, refreshing),
    ];
    return {
      rows,
      checks: [
        check(`${name}: one refresh grant per user`, grants === n, `${grants} refresh grants for ${n} users, ${grantErrors} failed`),
        check(`${name}: every request answered 2xx`, refreshing.errors === 0 && refreshing.requests === n, `${refreshing.requests} answered, ${refreshing.errors} errors/non-2xx`),
      ],
      data: { users: n, signInSeconds, refreshGrants: grants, refreshGrantErrors: grantErrors, refreshesPerSecond: perSecond, baseline: base, gatehouse: refreshing },
    };
  } finally {
    cast.ttl.login = 3600;
    await gateway.stop();
  }
};
