import { request } from 'node:http';
import { signIn } from '../../test/helpers/sign-in.js';
import type { Gateway } from '../cast.js';
import { noErrors, pairData, pairRows, runPairs, summarizePairs } from '../compare.js';
import { load } from '../load.js';
import type { Scenario } from '../scenario.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/** How many sites the multi-site gateway has (issue #30: the hot path with 20 sites costs no more than with one). */
const SITES = 20;
/** req/s with 20 sites within 3 % of the gateway without sites, in the same run. */
const RPS_TARGET = 0.97;

/**
 * The hot-path cost of `sites` (README "Several sites"): a signed-in request
 * with a fresh token through a gateway without `sites`, and the same request
 * to the last of 20 sites (`s20.localhost`, its own session from the
 * hand-off, its own route table, the `site` metrics label) through a gateway
 * with them; both running, 50 connections, in pairs. The "bare proxy" column
 * is the gateway without sites, so the ratio is 20 sites over none.
 */
export const sitesHotPath: Scenario = async ({ mode, cast, progress }) => {
  progress(`sites: no sites and ${SITES} sites side by side, ${mode.pairs} pairs`);
  const plain = await cast.startGateway({ name: 'sites-none' });
  let several: Gateway | undefined;
  try {
    several = await cast.startGateway({ name: `sites-${SITES}`, sites: SITES });
    const { cookie: plainCookie } = await signIn(plain.url, { user: 'alice' });
    const signInCookie = (await signIn(several.url, { user: 'alice' })).cookie;
    const port = new URL(several.url).port;
    const host = `s${SITES}.localhost:${port}`;
    const siteCookie = await handOff(several.url, signInCookie, host);
    await expectStatus(`${plain.url}${SMALL_PATH}`, plainCookie);
    const gateways = { a: plain, b: several };
    const run = (side: 'a' | 'b', seconds: number) =>
      load({
        url: `${gateways[side].url}${SMALL_PATH}`,
        connections: 50,
        duration: seconds,
        headers: side === 'a' ? { cookie: plainCookie } : { cookie: siteCookie, host },
        server: gateways[side].child,
      });
    if (mode.warmup > 0) {
      await run('a', mode.warmup);
      await run('b', mode.warmup);
    }
    const pair = summarizePairs(
      await runPairs(
        mode.pairs,
        () => run('a', mode.duration),
        () => run('b', mode.duration),
      ),
    );
    const name = `${SITES} sites vs no sites, hot path, 50 conns`;
    return { rows: pairRows(name, pair, { rps: RPS_TARGET }), checks: [noErrors(name, pair)], data: pairData(pair) };
  } finally {
    if (several !== undefined) await several.stop();
    await plain.stop();
  }
};

/**
 * The site's own session cookie, as a browser gets it (README "Several
 * sites"): /login on the sign-in host with the sign-in cookie and the site
 * URL as returnTo, then the hand-off URL on the site. node:http, because
 * fetch cannot send a Host header of its own.
 */
async function handOff(signInUrl: string, signInCookie: string, host: string): Promise<string> {
  const login = await get(signInUrl, `/login?returnTo=${encodeURIComponent(`http://${host}${SMALL_PATH}`)}`, { cookie: signInCookie });
  const location = login.headers.location;
  if (login.status !== 302 || location === undefined) throw new Error(`/login answered ${login.status} without a hand-off`);
  const handoff = new URL(location);
  const answer = await get(signInUrl, `${handoff.pathname}${handoff.search}`, { host });
  const cookie = (answer.headers['set-cookie'] ?? []).find((line) => line.startsWith('session_id=') && !line.startsWith('session_id=;'));
  if (cookie === undefined) throw new Error(`the hand-off answered ${answer.status} without a session cookie`);
  const siteCookie = cookie.split(';')[0]!;
  const check = await get(signInUrl, SMALL_PATH, { host, cookie: siteCookie });
  if (check.status !== 200) throw new Error(`GET ${SMALL_PATH} on ${host} answered ${check.status}`);
  return siteCookie;
}

function get(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; headers: import('node:http').IncomingHttpHeaders }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}
