import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { navigate } from '../helpers/navigate.js';

t.test('sign-in paths are rate limited per client address; proxied paths are not', async (t) => {
  const h = await startHarness({ config: { rateLimit: { max: 4, window: '1m' } } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });

  const login = () => fetch(`${h.url}/login`, { redirect: 'manual' });
  const callback = () => fetch(`${h.url}/callback?code=x&state=y`, { redirect: 'manual' });
  // The sign-in above made one request to each path.
  for (let n = 2; n <= 4; n++) {
    t.equal((await login()).status, 302, `sign-in request ${n} allowed`);
    t.equal((await callback()).status, 400, `callback ${n} refused on its merits (bad state)`);
  }

  const limited = await login();
  t.equal(limited.status, 429, 'fifth /login within the window: 429');
  t.ok(Number(limited.headers.get('retry-after')) > 0, 'Retry-After tells when to come back');
  t.same(await limited.json(), {
    error: 'too_many_requests',
    message: 'Too many sign-in requests from this address. Please wait a minute and try again.',
  });
  t.equal((await callback()).status, 429, 'fifth /callback within the window: 429');

  const page = await navigate(`${h.url}/login`);
  t.equal(page.status, 429);
  t.match(page.headers['content-type'], /^text\/html/);
  t.match(page.body, /Too many sign-in requests/);

  const asked = h.as.grants.authorizationCode;
  const proxied = await Promise.all(Array.from({ length: 20 }, () => fetch(`${h.url}/api/me`, { headers: { cookie } })));
  t.same(
    proxied.map((response) => response.status),
    Array.from({ length: 20 }, () => 200),
    'the signed-in user browses on',
  );
  t.equal(h.as.grants.authorizationCode, asked, 'no code was exchanged for a limited request');
});

t.test('rateLimit.max 0 turns the limit off', async (t) => {
  const h = await startHarness({ config: { rateLimit: { max: 0 } } });
  t.teardown(() => h.close());
  const statuses = await Promise.all(Array.from({ length: 80 }, () => fetch(`${h.url}/login`, { redirect: 'manual' }).then((r) => r.status)));
  t.same(new Set(statuses), new Set([302]));
});
