import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * README "Routes": the gateway's own paths come before every route. A
 * gateway path asked with a method it does not answer (DELETE /login, PUT
 * /callback, PATCH /session, POST /session) gets 405 from the gateway; it
 * used to fall through to the catch-all route and reach the upstream with
 * the user's bearer token.
 */
t.test('another method on a gateway path: 405, nothing upstream, the session kept', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const received = h.upstream.received.length;
  for (const [method, path] of [
    ['DELETE', '/login'],
    ['PUT', '/callback'],
    ['PATCH', '/session'],
    ['POST', '/session'],
    ['DELETE', '/%6Cogin'],
    ['PUT', '/session;x=1'],
  ] as const) {
    const response = await fetch(`${h.url}${path}`, { method, headers: { cookie, accept: 'application/json' }, redirect: 'manual' });
    t.equal(response.status, 405, `${method} ${path}`);
    t.match(await response.json(), { error: 'method_not_allowed' }, `${method} ${path}: the gateway's answer`);
    t.equal(response.headers.get('cache-control'), 'no-store');
  }
  t.equal(h.upstream.received.length, received, 'nothing reached the upstream');
  t.equal((await fetch(`${h.url}/anything`, { headers: { cookie } })).status, 200, 'the session still works');
});
