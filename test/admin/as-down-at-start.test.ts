import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * README "Run it": if the authorization server is down at start-up, the gateway
 * still listens, /readyz answers 503, discovery is retried at least every
 * 5 s, and requests that need the AS get 503 until it answers.
 */
t.test('the gateway starts while the AS is down, and becomes ready within 5 s of the AS coming back', async (t) => {
  const h = await startHarness({ asDownAtStart: true });
  t.teardown(() => h.close());
  const admin = h.gateway.adminAddress;

  const notReady = await fetch(`${admin}/readyz`);
  t.equal(notReady.status, 503);
  t.match(await notReady.json(), { provider: false, store: true, shuttingDown: false });
  t.equal((await fetch(`${admin}/healthz`)).status, 200, 'alive all the same');
  const login = await fetch(`${h.url}/login`, { redirect: 'manual' });
  t.equal(login.status, 503, '/login needs the AS');
  t.match(await login.json(), { error: 'provider_unavailable' });
  t.equal((await fetch(`${h.url}/api/me`)).status, 401, 'a request without a session is still answered as such');
  t.ok(h.logs.some((line) => line.msg === 'provider discovery failed' && line.level === 40), 'the failure is logged as a warning');

  h.asProxy.mode = 'up';
  const recovered = Date.now();
  let ready = false;
  while (!ready && Date.now() - recovered < 5500) {
    ready = (await fetch(`${admin}/readyz`)).status === 200;
    if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.ok(ready, `ready ${Date.now() - recovered} ms after the AS came back (at most 5 s)`);
  t.ok(h.logs.some((line) => line.msg === 'provider metadata loaded'));

  const redirect = await fetch(`${h.url}/login`, { redirect: 'manual' });
  t.equal(redirect.status, 302);
  t.match(redirect.headers.get('location'), new RegExp(`^${h.as.url}/`), 'to the authorization endpoint');
  const { cookie } = await signIn(h.url, { user: 'alice' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'a full sign-in works afterwards');
});
