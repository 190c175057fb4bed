import t from 'tap';
import { pseudonymOf, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

t.test('one access-log line per request, and the request id reaches the upstream', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });

  const given = await fetch(`${h.url}/api/headers?page=2`, { headers: { cookie, 'x-request-id': 'trace-42.a' } });
  t.equal((await given.json())['x-request-id'], 'trace-42.a', 'a sane client X-Request-Id is passed on');

  const made = await fetch(`${h.url}/api/headers`, { headers: { cookie, 'x-request-id': 'not sane\u00e9' } });
  const madeId = (await made.json())['x-request-id'] as string;
  t.match(madeId, /^[0-9a-f-]{36}$/, 'an unusable one is replaced by a UUID');

  const lines = h.logs.filter((line) => line.msg === 'request completed');
  t.equal(h.logs.filter((line) => line.reqId === 'trace-42.a').length, 1, 'the proxied request wrote one line, and only one');
  t.equal(h.logs.filter((line) => line.reqId === madeId).length, 1, 'so did the second');
  const proxied = lines.find((line) => line.reqId === 'trace-42.a');
  t.match(proxied, { method: 'GET', path: '/api/headers', route: 'proxy', status: 200, userId: pseudonymOf(h, 'alice') });
  t.notOk(h.logs.some((line) => line.userId === 'alice'), 'the user id itself is never logged');
  t.type(proxied?.upstreamMs, 'number', 'upstream time is logged');
  t.type(proxied?.ms, 'number', 'total time is logged');
  t.ok(lines.some((line) => line.reqId === madeId), 'the generated id is the one logged');
  t.notOk(h.logText().includes('page=2'), 'no query string is logged');

  await fetch(`${h.url}/api/me`);
  const refused = h.logs.filter((line) => line.msg === 'request completed' && line.status === 401);
  t.equal(refused.length, 1, 'a refused request is logged too');
  t.equal(h.logs.filter((line) => line.reqId === refused[0]!.reqId).length, 1, 'in one line, not two');
  t.notOk('userId' in refused[0]! || 'upstreamMs' in refused[0]!, 'without a user or an upstream time');
});
