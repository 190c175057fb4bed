import t from 'tap';
import { get, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/** README "Observe": /healthz 200 while the process runs; /readyz 200 only when ready and not while shutting down. */

t.test('healthz and readyz on the admin listener only', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const admin = h.gateway.adminAddress;
  t.not(admin, h.url, 'a listener of its own');

  const health = await fetch(`${admin}/healthz`);
  t.equal(health.status, 200);
  const ready = await fetch(`${admin}/readyz`);
  t.equal(ready.status, 200);
  t.match(await ready.json(), { status: 'ready', provider: true, store: true, shuttingDown: false });

  // The public listener does not serve them: without a session they are just protected paths.
  for (const path of ['/healthz', '/readyz', '/metrics']) t.equal((await fetch(`${h.url}${path}`)).status, 401, `public ${path}`);
});

t.test('readyz answers 503 while shutting down, and healthz 200, until the in-flight request is done', async (t) => {
  // The default grace (10 s): 32 MiB must finish inside it even on a busy two-core machine (1 s did not, now and then).
  const h = await startHarness({ config: { server: { shutdownGrace: 10 } } });
  t.teardown(() => h.close());
  const admin = h.gateway.adminAddress;
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const bytes = 32 * 1024 * 1024;
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    get(`${h.url}/api/large?bytes=${bytes}`, { headers: { cookie }, agent: false }, resolve).on('error', reject);
  });
  response.pause();

  const stopped = h.gateway.shutdown();
  const notReady = await fetch(`${admin}/readyz`);
  t.equal(notReady.status, 503);
  t.match(await notReady.json(), { status: 'not ready', shuttingDown: true });
  t.equal((await fetch(`${admin}/healthz`)).status, 200, 'still alive');

  let received = 0;
  response.on('data', (chunk: Buffer) => (received += chunk.length));
  response.resume();
  await once(response, 'end');
  await stopped;
  t.equal(received, bytes, 'the in-flight response completed');
  await t.rejects(fetch(`${admin}/healthz`), 'the admin listener is closed once the gateway has stopped');
});
