import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { jwtPayload, signOutAtAuthorizationServer } from './logout-token.js';

/**
 * OpenID Connect Back-Channel Logout 1.0, end to end with a real
 * oidc-provider: the user signs out at the authorization server, the AS
 * POSTs a signed logout token to the gateway, and the gateway session made
 * from that AS session ends. Sessions made from other AS sessions (another
 * browser of the same user, another user) keep working.
 */
t.test('signing out at the authorization server ends the gateway session of that AS session', async (t) => {
  const h = await startHarness({ backchannelLogout: true });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const deliveries: string[] = [];
  h.as.provider.on('backchannel.success', () => deliveries.push('ok'));
  h.as.provider.on('backchannel.error', (_ctx: unknown, err: Error) => deliveries.push(`error: ${err.message}`));
  const discovery = (await (await fetch(`${h.as.url}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  t.equal(discovery.backchannel_logout_supported, true, 'the demo AS supports back-channel logout');

  const laptopAtAs = new CookieJar();
  const laptop = await signIn(h.url, { user: 'alice', authorizationServerJar: laptopAtAs });
  const laptopSid = jwtPayload(watch.issued.at(-1)!.idToken!).sid;
  t.type(laptopSid, 'string', 'the ID token carries the AS session id (sid)');
  const phone = await signIn(h.url, { user: 'alice' });
  t.not(jwtPayload(watch.issued.at(-1)!.idToken!).sid, laptopSid, 'the phone signed in through another AS session');
  const bob = await signIn(h.url, { user: 'bob' });
  for (const { cookie } of [laptop, phone, bob]) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  await signOutAtAuthorizationServer(h.as, laptopAtAs);
  t.strictSame(deliveries, ['ok'], 'the AS delivered one logout token and the gateway answered 200');

  const me = await fetch(`${h.url}/api/me`, { headers: { cookie: laptop.cookie } });
  t.equal(me.status, 401, 'the laptop session has ended');
  t.strictSame(await me.json(), { error: 'unauthorized' });
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: laptop.cookie } })).status, 401);
  const phoneMe = await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } });
  t.equal(phoneMe.status, 200, "alice's phone (another AS session) still works");
  t.match(await phoneMe.json(), { sub: 'alice' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 200, 'bob is untouched');
  t.ok(
    h.logs.some((line) => line.msg === 'back-channel logout' && line.sessions === 1 && line.bySid === true),
    'the gateway logged one session ended by sid',
  );

  t.test('gateway logout, then sign-out at the AS: the late logout token is a harmless 200', async (t) => {
    const atAs = new CookieJar();
    const { cookie } = await signIn(h.url, { user: 'carol', authorizationServerJar: atAs });
    const logout = await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' });
    t.equal(logout.status, 302);
    const before = deliveries.length;
    await signOutAtAuthorizationServer(h.as, atAs);
    t.strictSame(deliveries.slice(before), ['ok'], 'the gateway answered the logout token for a session it already ended with 200');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 200, 'no other session was touched');
  });
});
