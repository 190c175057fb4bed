import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';

/**
 * README "Where tokens go": the upstream's answer is passed on once and as it is; a 503, with
 * or without Retry-After, is never retried by the gateway. @fastify/reply-from
 * retries a bodiless GET answered 503 up to ten times unless told otherwise.
 */
t.test('an upstream 503 reaches the browser after one upstream request', async (t) => {
  const upstream = await startScriptedUpstream();
  t.teardown(() => upstream.close());
  upstream.answer = (req, res) => {
    const retryAfter = new URL(req.url ?? '/', 'http://u.invalid').searchParams.get('retryAfter');
    res.writeHead(503, { 'content-type': 'text/plain', ...(retryAfter === null ? {} : { 'retry-after': retryAfter }) });
    res.end('busy');
  };
  const h = await startHarness({ config: { upstream: upstream.url } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });

  for (const [name, query] of [
    ['without Retry-After', ''],
    ['with Retry-After: 1', '?retryAfter=1'],
  ] as const) {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      const before = upstream.seen.length;
      const response = await fetch(`${h.url}/api/busy${query}`, { method, headers: { cookie } });
      const body = await response.text();
      t.equal(response.status, 503, `${method} ${name}: the upstream's 503 is passed on`);
      if (method === 'GET') t.equal(body, 'busy', 'with its body');
      if (query !== '') t.equal(response.headers.get('retry-after'), '1', 'and its Retry-After');
      // Give a retry (reply-from waits Retry-After as ms, or up to 42 ms) time to show.
      await new Promise((resolve) => setTimeout(resolve, 150));
      t.equal(upstream.seen.length - before, 1, `${method} ${name}: the upstream saw the request once`);
    }
  }
});
