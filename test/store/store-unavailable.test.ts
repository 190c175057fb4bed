import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie } from '../helpers/set-cookie.js';
import { redisMissing, startRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * README "Storage", store unreachable: 503 `{"error":"store_unavailable"}`, cookie
 * kept, nothing sent upstream, the in-process cache serves nothing once the
 * outage is known; the gateway reconnects by itself. A real outage needs a
 * store outside the process: redis-server, stopped and started again. It
 * keeps no data across the restart, so the old session then gets a clean
 * 401 and a new sign-in works. (A SQLite file cannot be made unreachable from
 * outside: in WAL mode the gateway's own connection holds a shared lock.)
 */
t.test('a store outage answers 503, then the gateway reconnects by itself', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const h = await startHarness({ store: redis.url });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  await redis.stop();
  const received = h.upstream.received.length;
  let served = 0;
  let outage: Response | undefined;
  await waitFor('a 503 from the gateway', async () => {
    const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    if (response.status === 503) outage = response;
    else {
      t.equal(response.status, 200, 'before the outage is known the cache may still serve');
      served += 1;
      await response.arrayBuffer();
    }
    return outage !== undefined;
  });
  t.strictSame(await outage!.json(), { error: 'store_unavailable' });
  t.equal(findSetCookie(outage!, 'session_id'), undefined, 'the cookie is kept');
  const again = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(again.status, 503, 'the cache serves nothing once the store is known unreachable');
  await again.arrayBuffer();
  const page = await fetch(`${h.url}/session`, { headers: { cookie } });
  t.equal(page.status, 503, '/session too');
  t.equal(findSetCookie(page, 'session_id'), undefined);
  t.equal(h.upstream.received.length, received + served, 'nothing was sent upstream during the outage');

  await redis.start();
  await waitFor('the gateway to reconnect', async () => {
    const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    await response.arrayBuffer();
    t.ok(response.status === 503 || response.status === 401, `503 or a clean 401, never another status (${response.status})`);
    return response.status === 401;
  }, 60_000, 250);
  const fresh = await signIn(h.url, { user: 'alice' });
  const me = await fetch(`${h.url}/api/me`, { headers: { cookie: fresh.cookie } });
  t.equal(me.status, 200, 'a new sign-in works on the reconnected store');
  t.match(await me.json(), { sub: 'alice' });
});
