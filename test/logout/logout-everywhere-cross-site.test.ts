import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees": a cross-site `GET /logout?everywhere=1` (a link or an image on
 * any site; the browser sends its Lax cookie on a top-level navigation)
 * signs out only this browser, never every device of the user. Only a POST
 * that passes the CSRF check, or a GET shown to be same-origin, ends them all.
 */
t.test('a cross-site logout everywhere ends only this browser', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  const attempts: Array<[string, Record<string, string>, string]> = [
    ['a link on another site (Sec-Fetch-Site: cross-site)', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }, 'GET'],
    ['a sibling subdomain (Sec-Fetch-Site: same-site)', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'navigate' }, 'GET'],
    ['an image on another site', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image' }, 'GET'],
    ['an older browser, a foreign Referer', { referer: 'https://evil.example/page' }, 'GET'],
    ['no fetch metadata, no Referer', {}, 'GET'],
    ['a HEAD from another site', { 'sec-fetch-site': 'cross-site' }, 'HEAD'],
  ];
  for (const [index, [name, headers, method]] of attempts.entries()) {
    t.test(name, async (t) => {
      const user = `victim-${index}`;
      const laptop = await signIn(h.url, { user });
      const phone = await signIn(h.url, { user });
      const shared = watch.issued.at(-1)!;
      const response = await fetch(`${h.url}/logout?everywhere=1`, { method, headers: { cookie: laptop.cookie, ...headers }, redirect: 'manual' });
      t.ok(response.status < 500, `answered ${response.status}`);
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 200, 'the phone is still signed in');
      t.equal((await introspect(h.as, shared.refreshToken!, 'refresh_token')).active, true, 'the refresh token is kept');
    });
  }

  t.test('a cross-site POST is refused and ends nothing', async (t) => {
    const laptop = await signIn(h.url, { user: 'post-victim' });
    const phone = await signIn(h.url, { user: 'post-victim' });
    const response = await fetch(`${h.url}/logout?everywhere=1`, {
      method: 'POST',
      headers: { cookie: laptop.cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      redirect: 'manual',
    });
    t.equal(response.status, 403);
    for (const { cookie } of [laptop, phone]) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  });
});
