import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * `/logout?everywhere=1`: every session of the user ends, in every browser,
 * and the refresh token is revoked at once, although other sessions
 * existed. Another user is untouched.
 */
t.test('logout everywhere', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  const variants: Array<[string, (cookie: string) => Promise<Response>]> = [
    [
      'GET /logout?everywhere=1, a navigation from a page of the site',
      (cookie) => fetch(`${h.url}/logout?everywhere=1`, { headers: { cookie, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate' }, redirect: 'manual' }),
    ],
    [
      'GET /logout?everywhere=1 typed in (Sec-Fetch-Site: none)',
      (cookie) => fetch(`${h.url}/logout?everywhere=1`, { headers: { cookie, 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate' }, redirect: 'manual' }),
    ],
    [
      'GET /logout?everywhere=1 from an older browser with a same-origin Referer',
      (cookie) => fetch(`${h.url}/logout?everywhere=1`, { headers: { cookie, referer: `${h.url}/account` }, redirect: 'manual' }),
    ],
    [
      'POST /logout?everywhere=1 from a page of the site',
      (cookie) => fetch(`${h.url}/logout?everywhere=1`, { method: 'POST', headers: { cookie, origin: h.url }, redirect: 'manual' }),
    ],
  ];
  for (const [name, logout] of variants) {
    t.test(name, async (t) => {
      const user = `user-${variants.findIndex(([variant]) => variant === name)}`;
      const laptop = await signIn(h.url, { user });
      const phone = await signIn(h.url, { user });
      const shared = watch.issued.at(-1)!;
      const bob = await signIn(h.url, { user: 'bob' });
      for (const { cookie } of [laptop, phone, bob]) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

      const response = await logout(laptop.cookie);
      t.equal(response.status, 302);
      t.equal(new URL(response.headers.get('location')!).searchParams.get('id_token_hint'), shared.idToken, 'on to the AS end-session endpoint');
      const cleared = findSetCookie(response, 'session_id');
      t.ok(cleared && isDeletion(cleared), "this browser's cookie is cleared");

      for (const [device, { cookie }] of [['laptop', laptop], ['phone', phone]] as const) {
        t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401, `the ${device} is signed out`);
        t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401);
      }
      t.equal((await introspect(h.as, shared.refreshToken!, 'refresh_token')).active, false, 'the refresh token is revoked');
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 200, 'another user is untouched');
    });
  }

  t.test('without everywhere, only this browser signs out (the other keeps the refresh token)', async (t) => {
    const laptop = await signIn(h.url, { user: 'cleo' });
    const phone = await signIn(h.url, { user: 'cleo' });
    for (const query of ['', '?everywhere=0']) {
      const again = query === '' ? laptop : await signIn(h.url, { user: 'cleo' });
      t.equal((await fetch(`${h.url}/logout${query}`, { headers: { cookie: again.cookie }, redirect: 'manual' })).status, 302);
      t.equal((await fetch(`${h.url}/session`, { headers: { cookie: again.cookie } })).status, 401);
    }
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 200, 'the phone still works');
    t.equal((await introspect(h.as, watch.issued.at(-1)!.refreshToken!, 'refresh_token')).active, true, 'the refresh token is kept');
  });

  t.test('everywhere given twice is a 400 that ends nothing', async (t) => {
    const { cookie } = await signIn(h.url, { user: 'dana' });
    const response = await fetch(`${h.url}/logout?everywhere=1&everywhere=1`, { headers: { cookie }, redirect: 'manual' });
    t.equal(response.status, 400);
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200);
  });
});
