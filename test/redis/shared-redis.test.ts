import { Writable } from 'node:stream';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logger.js';
import { startGateway } from '../../src/server.js';
import { freePort, mergeSections, startHarness } from '../helpers/harness.js';
import { redisMissing, startRedis } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { get, within } from './replicas.js';

t.test('with persistence, a Redis restart loses no session', { skip: redisMissing }, async (t) => {
  const redis = await startRedis({ persistent: true });
  t.teardown(() => redis.close());
  const h = await startHarness({ store: redis.url });
  t.teardown(() => h.close());
  const alice = await signIn(h.url, { user: 'alice' });
  t.equal((await get(h.url, '/api/me', alice.cookie)).status, 200);

  await redis.stop();
  t.equal((await get(h.url, '/api/me', alice.cookie)).status, 503, 'Redis down: 503');
  await redis.start();
  const statuses = new Set<number>();
  await within('the gateway to reconnect', 15_000, async () => {
    const { status } = await get(h.url, '/api/me', alice.cookie);
    statuses.add(status);
    return status !== 503;
  }, 50);
  t.strictSame([...statuses].sort(), [200, 503], 'only 503 while reconnecting, then the same cookie works');
  t.equal((await get(h.url, '/session', alice.cookie)).status, 200, 'the session came back from the append-only file');
});

t.test('gateways with different key prefixes share one Redis without seeing each other', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const h = await startHarness({ store: redis.url, config: { session: { keyPrefix: 'team-a' } } });
  t.teardown(() => h.close());
  const document = mergeSections(h.document, { server: { port: await freePort() }, session: { keyPrefix: 'team-b' } });
  const other = await startGateway(loadConfig(document, {}), { logger: createLogger('warn', new Writable({ write: (_c, _e, done) => done() })), cwd: h.dir });
  t.teardown(() => other.shutdown());
  const otherUrl = `http://127.0.0.1:${document.server && typeof document.server === 'object' ? String(document.server.port) : ''}`;

  const alice = await signIn(h.url, { user: 'alice' });
  t.equal((await get(h.url, '/api/me', alice.cookie)).status, 200, 'team-a knows the session');
  t.equal((await get(otherUrl, '/api/me', alice.cookie)).status, 401, 'team-b, on the same Redis, does not');

  const keys = (await redis.command('KEYS', '*')).split('\r\n').filter((line) => line.includes(':'));
  t.ok(keys.length > 0, 'keys were written');
  t.strictSame(keys.filter((key) => !key.startsWith('team-a:') && !key.startsWith('team-b:')), [], `every key carries a gateway's prefix (${keys.join(' ')})`);
  t.ok(keys.some((key) => key.startsWith('team-a:s:')) && keys.some((key) => key.startsWith('team-a:t:')), "team-a's session and tokens are under its prefix");
  t.strictSame(keys.filter((key) => /^team-b:[st]:/.test(key)), [], 'team-b holds no session or token');
});
