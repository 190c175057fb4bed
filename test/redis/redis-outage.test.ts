import { Writable } from 'node:stream';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logger.js';
import { startGateway } from '../../src/server.js';
import { freePort, mergeSections } from '../helpers/harness.js';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { get, signInAcross, startReplicas, within } from './replicas.js';

/**
 * README "Run several replicas (Redis)": with Redis unreachable every request that needs the store gets
 * 503 store_unavailable, keeps its cookie and sends nothing upstream; the
 * gateways reconnect by themselves. Redis runs without persistence, so after
 * its restart (or a FLUSHALL) every old session gets a clean 401, never a 5xx.
 */
t.test('Redis stopped: 503 with the cookie kept; restarted empty: 401 for old sessions and new logins work', { skip: redisMissing }, async (t) => {
  const { h, urls, gateways, redis } = await startReplicas(t, 2);
  const [a, b] = urls as [string, string];
  const alice = await signIn(a, { user: 'alice' });
  for (const url of urls) t.equal((await get(url, '/api/me', alice.cookie)).status, 200, 'cached on every replica');

  await redis.stop();
  const received = h.upstream.received.length;
  for (const url of urls) {
    const down = await get(url, '/api/me', alice.cookie);
    t.equal(down.status, 503, `${url === a ? 'A' : 'B'} answers 503 at once, its cache notwithstanding`);
    t.same(JSON.parse(down.body), { error: 'store_unavailable' });
    t.strictSame(down.setCookie.filter((line) => line.startsWith('session_id=')), [], 'the cookie is kept');
    t.equal((await get(url, '/session', alice.cookie)).status, 503);
  }
  t.equal(h.upstream.received.length, received, 'nothing was sent upstream');
  for (const gateway of gateways) {
    await within('readiness to drop', 10_000, async () => (await fetch(`${gateway.adminAddress}/readyz`)).status === 503, 100);
  }

  await redis.start();
  for (const url of urls) {
    const statuses: number[] = [];
    await within('the gateway to reconnect', 15_000, async () => {
      const { status } = await get(url, '/api/me', alice.cookie);
      statuses.push(status);
      return status !== 503;
    }, 50);
    t.strictSame([...new Set(statuses.slice(0, -1))].filter((status) => status !== 503), [], 'only 503 while reconnecting');
    const after = await get(url, '/api/me', alice.cookie);
    t.equal(after.status, 401, 'the session Redis lost is a clean 401');
    t.same(JSON.parse(after.body), { error: 'unauthorized' });
    t.match(after.setCookie.join('\n'), /session_id=;/, 'and its cookie is cleared');
  }
  t.equal(h.upstream.received.length, received, 'still nothing sent upstream');
  for (const gateway of gateways) {
    await within('readiness to return', 10_000, async () => (await fetch(`${gateway.adminAddress}/readyz`)).status === 200, 100);
  }

  const bob = await signInAcross(a, b, 'bob');
  t.equal(bob.status, 302, 'a new login works without restarting any gateway');
  for (const url of urls) t.equal((await get(url, '/api/me', bob.cookie)).status, 200);
});

t.test('after FLUSHALL every replica answers 401 for the lost sessions', { skip: redisMissing }, async (t) => {
  const { urls, redis } = await startReplicas(t, 2);
  const alice = await signIn(urls[0]!, { user: 'alice' });
  for (const url of urls) t.equal((await get(url, '/api/me', alice.cookie)).status, 200, 'cached on every replica');

  t.equal(await redis.command('FLUSHALL'), '+OK');
  for (const url of urls) {
    const statuses = new Set<number>();
    const took = await within('the flushed session to be refused', 5000, async () => {
      const { status } = await get(url, '/api/me', alice.cookie);
      statuses.add(status);
      return status === 401;
    }, 20);
    t.ok([...statuses].every((status) => status === 200 || status === 401), `never a 5xx (saw ${[...statuses].join(', ')})`);
    t.comment(`401 ${took.toFixed(0)} ms after FLUSHALL`);
  }
  const carol = await signIn(urls[0]!, { user: 'carol' });
  for (const url of urls) t.equal((await get(url, '/api/me', carol.cookie)).status, 200, 'new sessions work');
});

t.test('a replica started while Redis is down listens, answers 503, and works once Redis is up', { skip: redisMissing }, async (t) => {
  const { h, redis } = await startReplicas(t, 1);
  await redis.stop();
  const document = mergeSections(h.document, { server: { port: await freePort() } });
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const late = await startGateway(loadConfig(document, {}), { logger: createLogger('warn', sink), cwd: h.dir });
  t.teardown(() => late.shutdown());
  const alice = `session_id=${'A'.repeat(43)}`;
  const down = await get(late.address, '/api/me', alice);
  t.equal(down.status, 503, 'a request that needs the store gets 503');
  t.same(JSON.parse(down.body), { error: 'store_unavailable' });
  await within('readiness to be false', 10_000, async () => (await fetch(`${late.adminAddress}/readyz`)).status === 503, 100);

  await redis.start();
  await within('readiness once Redis answers', 15_000, async () => (await fetch(`${late.adminAddress}/readyz`)).status === 200, 100);
  t.equal((await get(late.address, '/api/me', alice)).status, 401, 'an unknown session is a clean 401');
  const bob = await signInAcross(late.address, late.address, 'bob');
  t.equal(bob.status, 302, 'sign-in works through the late replica');
  t.equal((await get(late.address, '/api/me', bob.cookie)).status, 200);
});

t.test('a hung Redis (CLIENT PAUSE): 503 within the store timeout, then the same session works again', { skip: redisMissing }, async (t) => {
  const { h, urls, redis } = await startReplicas(t, 1);
  const url = urls[0]!;
  const alice = await signIn(url, { user: 'alice' });
  t.equal((await get(url, '/api/me', alice.cookie)).status, 200);

  t.equal(await redis.command('CLIENT', 'PAUSE', '8000', 'ALL'), '+OK');
  // The ping that finds the store hung takes up to the call timeout; then the cache stops serving.
  const statuses = new Set<number>();
  await within('the hung store to be noticed', 6000, async () => {
    const { status } = await get(url, '/api/me', alice.cookie);
    statuses.add(status);
    return status === 503;
  }, 100);
  t.ok([...statuses].every((status) => status === 200 || status === 503), `never another status (saw ${[...statuses].join(', ')})`);
  const received = h.upstream.received.length;
  const down = await get(url, '/api/me', alice.cookie);
  t.equal(down.status, 503, 'answers 503 while Redis hangs');
  t.strictSame(down.setCookie.filter((line) => line.startsWith('session_id=')), [], 'the cookie is kept');
  t.equal(h.upstream.received.length, received, 'nothing is sent upstream while the store is known to hang');

  await redis.command('CLIENT', 'UNPAUSE');
  await within('the store to answer again', 10_000, async () => (await get(url, '/api/me', alice.cookie)).status !== 503, 100);
  t.equal((await get(url, '/api/me', alice.cookie)).status, 200, 'the same session works once Redis answers: nothing was lost');
});
