import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

t.test('a signed-in browser reaches the upstream with a bearer token', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const response = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(response.status, 200);
  t.match(await response.json(), { sub: 'alice' });
});
