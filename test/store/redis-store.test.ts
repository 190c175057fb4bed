import t from 'tap';
import { redisMissing, startRedis } from '../helpers/redis.js';
import { storeConformance } from './store-conformance.js';

/** The redis:// backend passes the same store conformance suite as memory:// and sqlite://, against a real redis-server. */
t.test('redis://', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  await storeConformance(t, redis.url, process.cwd());
});
