import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/** README "WebSockets and server-sent events": server-sent events reach the browser as the upstream sends them; a reconnect without a session gets 401. */

const QUIET_MS = 3000;

t.test('each event arrives before the upstream sends the next; a quiet stream is not cut; no session: 401', async (t) => {
  let release: () => void = () => undefined;
  const secondMayGo = new Promise<void>((resolve) => (release = resolve));
  const upstream = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    response.write('data: first\n\n');
    void secondMayGo.then(() => {
      // Quiet for three times the route's timeout and server.idleTimeout (1 s each here): the route's timeout bounds
      // only the wait for the head (reply-from would apply it to each body chunk too), and a quiet stream is not a stalled client.
      setTimeout(() => response.end('data: second\n\n'), QUIET_MS);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => upstream.close(resolve)));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const h = await startHarness({ config: { server: { idleTimeout: '1s' }, routes: [{ path: '/', upstream: upstreamUrl, timeout: '1s' }] } });
  t.teardown(() => h.close());

  const { cookie } = await signIn(h.url, { user: 'listener' });
  const response = await fetch(`${h.url}/events`, { headers: { cookie, accept: 'text/event-stream' } });
  t.equal(response.status, 200);
  t.match(response.headers.get('content-type'), /^text\/event-stream/);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const first = await Promise.race([reader.read(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the first event was held back')), 5000))]);
  t.equal(decoder.decode(first.value), 'data: first\n\n', 'the first event arrived while the upstream waits to send the second');
  release();
  let rest = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    rest += decoder.decode(value);
  }
  t.equal(rest, 'data: second\n\n', `the stream ends as the upstream ended it, after a quiet ${QUIET_MS / 1000} s, three times the route's timeout`);

  const reconnect = await fetch(`${h.url}/events`, { headers: { accept: 'text/event-stream' }, redirect: 'manual' });
  t.equal(reconnect.status, 401, 'an EventSource reconnect without a session: 401, never a redirect');
  t.strictSame(await reconnect.json(), { error: 'unauthorized' });
});
