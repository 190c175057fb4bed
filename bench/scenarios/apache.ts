import { join } from 'node:path';
import { signIn, approveAtAuthorizationServer } from '../../test/helpers/sign-in.js';
import { CookieJar } from '../../test/helpers/cookie-jar.js';
import { httpSend } from '../../test/helpers/http-request.js';
import { APACHE_REDIRECT_PATH, apacheInstalled, startApache } from '../apache-server.js';
import { comparePair, noErrors, pairData, pairRows, type Target } from '../compare.js';
import { SERVER_CORE } from '../processes.js';
import { mib, MIB, ratio, type Row, type Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** The row label: in these rows the baseline column is Apache, not the bare proxy. */
const SCENARIO = 'Apache + mod_auth_openidc (baseline column)';

/**
 * Apache httpd + mod_auth_openidc (Debian's apache2 and
 * libapache2-mod-auth-openidc) as the second baseline: the same user signed in
 * for real at each, then the hot path at 50 connections and 1 MiB responses at
 * 10 connections, Apache (A) and gatehouse (B) alternating, each pinned to the
 * server core; idle RSS of each after sign-in. Ratios are gatehouse / Apache.
 */
export const apache: Scenario = async ({ mode, cast, progress }) => {
  if (!apacheInstalled()) {
    return {
      rows: [{ scenario: SCENARIO, metric: 'hot path req/s', baseline: '', gatehouse: '', ratio: '', target: '', met: undefined }],
      checks: [],
      data: { installed: false },
      skipped: 'skipped: apache2/libapache2-mod-auth-openidc not installed (apt-get install -y apache2 libapache2-mod-auth-openidc)',
    };
  }
  const server = await startApache({
    dir: join(cast.dir, 'apache'),
    port: cast.apache.port,
    issuer: cast.as.url,
    clientId: cast.apache.clientId,
    clientSecret: cast.apache.clientSecret,
    upstreamUrl: cast.upstreamUrl,
    core: cast.pinned ? SERVER_CORE : undefined,
  });
  const gateway = await cast.startGateway({ name: 'apache-comparison' });
  try {
    const apacheCookie = await signInThroughApache(server.url, 'alice').catch((err: Error) => {
      throw new Error(`${err.message}; apache's error log: ${server.stderr()}`);
    });
    const { cookie: gatewayCookie } = await signIn(gateway.url, { user: 'alice' });
    // One Cookie header for both: each ignores the other's cookie (and passes it upstream).
    const cookie = `${gatewayCookie}; ${apacheCookie}`;
    await expectStatus(`${server.url}${SMALL_PATH}`, cookie);
    await expectStatus(`${gateway.url}${SMALL_PATH}`, cookie);
    const apacheTarget: Target = { url: server.url, child: server };
    const gatehouse: Target = { url: gateway.url, child: gateway.child };
    const idle = { apache: server.rss(), gatehouse: gateway.child.rss() };

    progress(`apache: hot path, 50 connections, ${mode.pairs} pairs`);
    const hot = await comparePair(mode, SMALL_PATH, { connections: 50, headers: { cookie } }, apacheTarget, gatehouse);
    progress(`apache: 1 MiB responses, 10 connections, ${mode.pairs} pairs`);
    const large = await comparePair(mode, `/large?bytes=${MIB}`, { connections: 10, headers: { cookie } }, apacheTarget, gatehouse, { metric: 'bytesPerSecond' });

    const rows: Row[] = [
      ...pairRows(`${SCENARIO}: hot path, 50 conns`, hot),
      // Issue #32 item 6: gatehouse streams 1 MiB responses at least as fast as Apache + mod_auth_openidc.
      ...pairRows(`${SCENARIO}: 1 MiB responses, 10 conns`, large, { rps: 1 }, 'MiB/s'),
      {
        scenario: `${SCENARIO}: memory`,
        metric: 'idle RSS after one sign-in (Apache: parent + worker)',
        baseline: mib(idle.apache),
        gatehouse: mib(idle.gatehouse),
        ratio: ratio(idle.gatehouse / idle.apache),
        target: '',
      },
    ];
    return {
      rows,
      checks: [noErrors(`${SCENARIO}: hot path`, hot), noErrors(`${SCENARIO}: 1 MiB responses`, large)],
      data: { hot: pairData(hot), large: pairData(large), idleRss: idle },
    };
  } finally {
    await gateway.stop();
    await server.stop();
  }
};

/** What a browser sends on a navigation: mod_auth_openidc answers anything else that lacks a session with 401, not a redirect. */
const NAVIGATION = { accept: 'text/html', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' };

/**
 * The code flow through mod_auth_openidc: a protected URL, the AS login form,
 * its redirect URI; returns its session cookie. node:http, because fetch
 * sends `Sec-Fetch-Mode: cors` whatever it is told.
 */
async function signInThroughApache(apacheUrl: string, user: string): Promise<string> {
  const start = await httpSend(apacheUrl, { path: SMALL_PATH, headers: NAVIGATION });
  const location = start.headers.location;
  if (start.status !== 302 || location === undefined) throw new Error(`apache answered ${start.status} to an unauthenticated navigation, not a redirect to the AS`);
  const jar = new CookieJar();
  jar.store(apacheUrl, start.headers['set-cookie'] ?? []);
  const callback = await approveAtAuthorizationServer(new URL(location), user, new CookieJar(), `${apacheUrl}${APACHE_REDIRECT_PATH}`);
  const done = await httpSend(apacheUrl, { path: `${callback.pathname}${callback.search}`, headers: { ...NAVIGATION, cookie: jar.header(apacheUrl) ?? '' } });
  jar.store(apacheUrl, done.headers['set-cookie'] ?? []);
  const session = jar.get(apacheUrl, 'mod_auth_openidc_session');
  if (session === undefined) throw new Error(`apache's redirect URI answered ${done.status} without a session cookie: ${done.body.toString('utf8').slice(0, 300)}`);
  return `mod_auth_openidc_session=${session}`;
}
