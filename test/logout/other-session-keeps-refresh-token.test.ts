import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees", /logout: the refresh token is revoked only when no other session
 * of the user remains. Two browsers of one user share the token record
 * (README "Storage": the later login replaced it); the first logout leaves the other
 * browser working and the token alive, the second revokes it.
 */
t.test('a user signed in twice: the first logout keeps the refresh token, the last revokes it', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  const laptop = await signIn(h.url, { user: 'alice' });
  const phone = await signIn(h.url, { user: 'alice' });
  const shared = watch.issued.at(-1)!;
  t.not(laptop.cookie, phone.cookie, 'two sessions');
  for (const { cookie } of [laptop, phone]) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  const first = await fetch(`${h.url}/logout`, { headers: { cookie: laptop.cookie }, redirect: 'manual' });
  t.equal(first.status, 302);
  t.equal(new URL(first.headers.get('location')!).searchParams.get('id_token_hint'), shared.idToken, 'hint given on the first logout too');
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: laptop.cookie } })).status, 401, 'the laptop is signed out');
  t.equal((await introspect(h.as, shared.refreshToken!, 'refresh_token')).active, true, 'the refresh token is not revoked');
  const me = await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } });
  t.equal(me.status, 200, 'the phone still works');
  t.match(await me.json(), { sub: 'alice' });
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: phone.cookie } })).status, 200);

  const last = await fetch(`${h.url}/logout`, { method: 'POST', headers: { cookie: phone.cookie, origin: h.url }, redirect: 'manual' });
  t.equal(last.status, 302);
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: phone.cookie } })).status, 401, 'the phone is signed out');
  t.equal((await introspect(h.as, shared.refreshToken!, 'refresh_token')).active, false, 'the last logout revokes the refresh token');
});
