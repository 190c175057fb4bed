import t from 'tap';
import type { ServerResponse } from 'node:http';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * README "Limits under abuse": at most `limits.perUserConcurrency` proxied requests of one user
 * are in flight at once; more get 429 with Retry-After, other users are
 * unaffected, and server-sent event streams stop counting once their head
 * is sent. The upstream holds `/hold` requests until the test lets them go.
 */
t.test('one user beyond the limit gets 429 while others pass', async (t) => {
  const upstream = await startScriptedUpstream();
  t.teardown(() => upstream.close());
  const held: ServerResponse[] = [];
  upstream.answer = (req, res) => {
    if (req.url?.startsWith('/hold')) held.push(res);
    else if (req.url?.startsWith('/events')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      res.write('data: hello\n\n');
    } else res.end('ok');
  };
  const h = await startHarness({ config: { upstream: upstream.url, limits: { perUserConcurrency: 3 } } });
  t.teardown(() => h.close());
  const alice = await signIn(h.url, { user: 'alice' });
  const bob = await signIn(h.url, { user: 'bob' });

  const pending = [1, 2, 3].map((i) => fetch(`${h.url}/hold/${i}`, { headers: { cookie: alice.cookie } }));
  await waitFor('three held requests at the upstream', async () => held.length === 3);
  const refused = await fetch(`${h.url}/api/fourth`, { headers: { cookie: alice.cookie } });
  t.equal(refused.status, 429, "alice's fourth request in flight is refused");
  t.equal(refused.headers.get('retry-after'), '1', 'with Retry-After');
  t.match(await refused.json(), { error: 'too_many_requests' });
  t.notOk(upstream.seen.some((seen) => seen.url === '/api/fourth'), 'and never reaches the upstream');

  const other = await fetch(`${h.url}/api/bob`, { headers: { cookie: bob.cookie } });
  t.equal(other.status, 200, 'another user is unaffected');
  await other.text();

  for (const response of held.splice(0)) response.end('done');
  for (const response of await Promise.all(pending)) {
    t.equal(response.status, 200);
    await response.text();
  }
  const after = await fetch(`${h.url}/api/again`, { headers: { cookie: alice.cookie } });
  t.equal(after.status, 200, 'slots are given back when responses end');
  await after.text();

  // Event streams stop counting once their head is sent: three open streams leave every slot free.
  const streams = await Promise.all([1, 2, 3].map((i) => fetch(`${h.url}/events/${i}`, { headers: { cookie: alice.cookie } })));
  for (const stream of streams) t.equal(stream.headers.get('content-type'), 'text/event-stream');
  const beside = await Promise.all([1, 2, 3].map((i) => fetch(`${h.url}/api/beside-${i}`, { headers: { cookie: alice.cookie } })));
  t.strictSame(beside.map((response) => response.status), [200, 200, 200], 'requests beside open event streams pass');
  for (const response of beside) await response.text();
  for (const stream of streams) await stream.body?.cancel();

  // Aborted requests give their slot back too.
  const controllers = [1, 2, 3].map(() => new AbortController());
  const aborted = controllers.map((controller, i) => fetch(`${h.url}/hold/abort-${i}`, { headers: { cookie: alice.cookie }, signal: controller.signal }).catch(() => undefined));
  await waitFor('three more held requests', async () => held.length === 3);
  for (const controller of controllers) controller.abort();
  await Promise.all(aborted);
  await waitFor('the slots of aborted requests to come back', async () => {
    const response = await fetch(`${h.url}/api/after-abort`, { headers: { cookie: alice.cookie } });
    await response.text();
    return response.status === 200;
  });
  for (const response of held.splice(0)) response.destroy();
  t.pass('aborted requests released their slots');
});
