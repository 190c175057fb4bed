import { join } from 'node:path';
import { comparePair, noErrors, pairData, pairRows } from '../compare.js';
import { fixed, type Scenario } from '../scenario.js';
import { seedSessions } from '../seed.js';
import { expectStatus } from '../users.js';
import { SMALL_PATH } from './hot-path.js';

/**
 * Cold sessions: more users than the LRU holds (session.cacheSize below the
 * user count, each session taking two entries: session and token record),
 * requested round-robin, so every request reads its session and its sealed
 * token record from SQLite and unseals it; in pairs against the bare proxy.
 * Target: req/s ≥ 0.60 × the bare proxy.
 */
export const coldSession: Scenario = async ({ mode, cast, progress }) => {
  const sqlitePath = join(cast.dir, 'cold.sqlite');
  progress(`cold session: seeding ${mode.coldSessions} sessions`);
  const seeded = await seedSessions(sqlitePath, mode.coldSessions, cast.sessionKey);
  const gateway = await cast.startGateway({ name: 'cold-session', sqlitePath, cacheSize: mode.coldCacheSize });
  try {
    const cookies = Array.from({ length: seeded.count }, (_, i) => seeded.cookie(i));
    await expectStatus(`${gateway.url}${SMALL_PATH}`, cookies[0]);
    progress(`cold session: ${seeded.count} users, cacheSize ${mode.coldCacheSize}, 50 connections`);
    const pair = await comparePair(mode, SMALL_PATH, { connections: 50, cookies }, { url: cast.baselineUrl, child: cast.baseline }, { url: gateway.url, child: gateway.child });
    const name = `cold session (${fixed(seeded.count)} users, cache ${fixed(mode.coldCacheSize)})`;
    return {
      rows: pairRows(name, pair, { rps: 0.6 }),
      checks: [noErrors(name, pair)],
      data: { users: seeded.count, cacheSize: mode.coldCacheSize, seedSeconds: seeded.seconds, ...pairData(pair) },
    };
  } finally {
    await gateway.stop();
  }
};
