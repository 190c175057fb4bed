import t from 'tap';
import { redisMissing } from '../helpers/redis.js';
import { get, startReplicas } from './replicas.js';

/**
 * README "Limits under abuse": with a Redis store the sign-in rate limit is
 * one count for every replica, so replicas behind a load balancer do not
 * multiply `rateLimit.max`.
 */
t.test('two gateways on one Redis share the sign-in rate limit of a client address', { skip: redisMissing }, async (t) => {
  const { urls, redis } = await startReplicas(t, 2, { config: { rateLimit: { max: 4, window: '1m' } } });
  const [a, b] = urls as [string, string];

  const statuses: number[] = [];
  for (let n = 0; n < 6; n += 1) statuses.push((await get(n % 2 === 0 ? a : b, '/login')).status);
  t.strictSame(statuses, [302, 302, 302, 302, 429, 429], 'four sign-in requests in all, alternating between the replicas');
  const refused = await fetch(`${b}/login`, { redirect: 'manual' });
  t.equal(refused.status, 429);
  t.ok(Number(refused.headers.get('retry-after')) > 0, 'Retry-After from the shared window');

  t.equal((await get(a, '/callback?code=x&state=y')).status, 400, 'the callback path has a count of its own');
  t.match(await redis.command('GET', 'gatehouse:r:login:127.0.0.1'), /^\$1\r\n7$/, 'one counter in Redis for the login path and this address');
  const ttl = Number((await redis.command('PTTL', 'gatehouse:r:login:127.0.0.1')).slice(1));
  t.ok(ttl > 0 && ttl <= 60_000, `the counter expires with its window (${ttl} ms)`);

  await redis.stop();
  const down = await get(a, '/login');
  t.equal(down.status, 503, 'with Redis down the limit cannot be counted: 503, never an uncounted sign-in');
  t.same(JSON.parse(down.body), { error: 'store_unavailable' });
});
