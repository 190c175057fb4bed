import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { openBackend } from '../../src/session/backends/open.js';
import { Sealer } from '../../src/session/seal.js';
import { SessionStore } from '../../src/session/store.js';
import { LatencyRecorder, load } from '../load.js';
import { check, fixed, mib, MIB, ms, type Row, type Scenario } from '../scenario.js';
import { seedSessions, type Seeded } from '../seed.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

const GATEWAY_CACHE_SIZE = 10_000;

/**
 * Scale of the store: `mode.storeSessions` sessions (one user each) in
 * SQLite. File size; cold lookups through SessionStore with a one-entry
 * cache (the page cache is warm: the file was just written), p99 target
 * < 2 ms; then a gateway with cacheSize 10000 serving requests of many
 * distinct sessions, whose RSS must stay under 150 MiB.
 */
export const storeScale: Scenario = async ({ mode, cast, progress }) => {
  const sqlitePath = join(cast.dir, 'scale.sqlite');
  progress(`store scale: seeding ${fixed(mode.storeSessions)} sessions`);
  const seeded = await seedSessions(sqlitePath, mode.storeSessions, cast.sessionKey);
  const fileBytes = [sqlitePath, `${sqlitePath}-wal`].filter(existsSync).reduce((sum, file) => sum + statSync(file).size, 0);

  progress(`store scale: ${fixed(mode.lookups)} cold lookups`);
  const lookups = await timeLookups(sqlitePath, seeded, mode.lookups, cast.sessionKey);

  const gateway = await cast.startGateway({ name: 'store-scale', sqlitePath, cacheSize: GATEWAY_CACHE_SIZE });
  try {
    const step = Math.max(1, Math.floor(seeded.count / mode.storeRequestSessions));
    const cookies = Array.from({ length: Math.min(mode.storeRequestSessions, seeded.count) }, (_, k) => seeded.cookie(k * step));
    await expectStatus(`${gateway.url}${SMALL_PATH}`, cookies[0]);
    const rssIdle = gateway.child.rss();
    // The same load on a few sessions first: what load alone adds to RSS (heap growth, buffers), before the cache fills.
    await load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration: mode.quick ? 1 : 5, cookies: cookies.slice(0, 50) });
    const rssLoaded = gateway.child.rss();
    progress(`store scale: gateway serving ${fixed(cookies.length)} distinct sessions`);
    const served = await load({ url: `${gateway.url}${SMALL_PATH}`, connections: 50, duration: mode.quick ? 1 : 10, cookies, server: gateway.child });
    const rssAfter = gateway.child.rss();
    const name = `store scale (${fixed(seeded.count)} sessions)`;
    const rows: Row[] = [
      { scenario: name, metric: 'SQLite file size', baseline: '', gatehouse: `${mib(fileBytes)} (${fixed(fileBytes / seeded.count)} B/session)`, ratio: '', target: '' },
      { scenario: name, metric: 'seeding (raw transaction)', baseline: '', gatehouse: `${fixed(seeded.seconds, 1)} s`, ratio: '', target: '' },
      {
        scenario: name,
        metric: 'getSession, cold (p50 / p99)',
        baseline: '',
        gatehouse: `${ms(lookups.session.percentile(0.5))} / ${ms(lookups.session.percentile(0.99))}`,
        ratio: '',
        target: 'p99 < 2 ms',
        met: lookups.session.percentile(0.99) < 2,
      },
      {
        scenario: name,
        metric: 'getSession + getTokens (unseal), cold (p50 / p99)',
        baseline: '',
        gatehouse: `${ms(lookups.resolve.percentile(0.5))} / ${ms(lookups.resolve.percentile(0.99))}`,
        ratio: '',
        target: '',
      },
      {
        scenario: name,
        metric: `gateway req/s, ${fixed(cookies.length)} sessions round-robin, cacheSize ${fixed(GATEWAY_CACHE_SIZE)}`,
        baseline: '',
        gatehouse: `${fixed(served.rps)} (p99 ${ms(served.p99)})`,
        ratio: '',
        target: '',
      },
      {
        scenario: name,
        metric: `RSS: gateway with cacheSize ${fixed(GATEWAY_CACHE_SIZE)} (idle → loaded, 50 sessions → after ${fixed(cookies.length)} sessions); bare proxy now`,
        baseline: mib(cast.baseline.rss()),
        gatehouse: `${mib(rssIdle)} → ${mib(rssLoaded)} → ${mib(rssAfter)}`,
        ratio: '',
        target: '< 150 MiB',
        met: rssAfter < 150 * MIB,
      },
    ];
    return {
      rows,
      checks: [
        check(`${name}: every lookup found its session`, lookups.missing === 0, `${lookups.missing} of ${mode.lookups * 2} lookups found nothing`),
        check(`${name}: gateway answered 2xx`, served.errors === 0, `${served.errors} errors/non-2xx of ${served.requests}`),
      ],
      data: {
        sessions: seeded.count,
        fileBytes,
        seedSeconds: seeded.seconds,
        getSession: { p50: lookups.session.percentile(0.5), p99: lookups.session.percentile(0.99), max: lookups.session.percentile(1) },
        getSessionAndTokens: { p50: lookups.resolve.percentile(0.5), p99: lookups.resolve.percentile(0.99), max: lookups.resolve.percentile(1) },
        gateway: { cacheSize: GATEWAY_CACHE_SIZE, distinctSessions: cookies.length, rssIdle, rssLoaded, rssAfter, baselineRss: cast.baseline.rss(), load: served },
      },
    };
  } finally {
    await gateway.stop();
  }
};

/** Times `count` getSession calls and `count` getSession + getTokens calls on random sessions, through a one-entry cache. */
async function timeLookups(sqlitePath: string, seeded: Seeded, count: number, sessionKey: string) {
  const store = new SessionStore(await openBackend(`sqlite://${sqlitePath}`, '/'), new Sealer([sessionKey]), 1);
  const session = new LatencyRecorder();
  const resolve = new LatencyRecorder();
  let missing = 0;
  try {
    const hashes = Array.from({ length: count * 2 }, () => seeded.hash(Math.floor(Math.random() * seeded.count)));
    for (let k = 0; k < count * 2; k += 1) {
      const started = process.hrtime.bigint();
      const found = await store.getSession(hashes[k]!);
      const tokens = k < count || !found ? found : await store.getTokens(found.userId);
      const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
      if (!tokens) missing += 1;
      (k < count ? session : resolve).add(elapsed);
    }
  } finally {
    await store.close();
  }
  return { session, resolve, missing };
}
