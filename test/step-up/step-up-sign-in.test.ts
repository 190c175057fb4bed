import t from 'tap';
import { startRoutesHarness } from '../helpers/routes-harness.js';
import { approveAtAuthorizationServer, signInAt, startLogin } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';

/**
 * README "Step-up", the sign-in half: /login asks the AS for the step-up
 * (acr_values, max_age, prompt=login) that the route of returnTo, or the
 * link, names; the pending login keeps it; the callback verifies the new ID
 * token's acr and auth_time against it (403, no session, when not met).
 */
const PASSWORD = 'urn:gatehouse:test:pwd';
const MFA = 'urn:gatehouse:test:mfa';

interface SessionBody {
  user: { sub: string };
  acr: string | null;
  auth_time: number | null;
}

async function sessionOf(url: string, cookie: string): Promise<SessionBody> {
  const response = await fetch(`${url}/session`, { headers: { cookie } });
  if (response.status !== 200) throw new Error(`/session answered ${response.status}`);
  return (await response.json()) as SessionBody;
}

t.test('step-up sign-in', async (t) => {
  const h = await startRoutesHarness(
    ({ web, api }) => [
      { path: '/admin', upstream: api.url, stepUp: { acr: [MFA], maxAge: '60s' } },
      { path: '/recent', upstream: api.url, stepUp: { maxAge: 2 } },
      { path: '/', upstream: web.url },
    ],
    { signInLevels: { password: PASSWORD, secondFactor: MFA } },
  );
  t.teardown(() => h.close());
  const asked: Array<Record<string, unknown>> = [];
  h.as.provider.on('interaction.started', (ctx) => asked.push({ ...ctx.oidc.params }));

  t.test('the route of returnTo decides what /login asks the AS for', async (t) => {
    const guarded = (await startLogin(h.url, { returnTo: '/admin/users?page=2' })).authorizationUrl.searchParams;
    t.equal(guarded.get('acr_values'), MFA);
    t.equal(guarded.get('max_age'), '60');
    t.equal(guarded.get('prompt'), 'login', 'prompt=login with maxAge');
    const plain = (await startLogin(h.url, { returnTo: '/home' })).authorizationUrl.searchParams;
    for (const name of ['acr_values', 'max_age', 'prompt']) t.equal(plain.get(name), null, `no ${name} for a route without stepUp`);
    const onlyAcr = new URL((await fetch(`${h.url}/login?returnTo=%2Fhome&acr_values=${encodeURIComponent(`${MFA} ${PASSWORD}`)}`, { redirect: 'manual' })).headers.get('location')!);
    t.equal(onlyAcr.searchParams.get('acr_values'), `${MFA} ${PASSWORD}`, 'acr_values from the link, space-separated, in order');
    t.equal(onlyAcr.searchParams.get('prompt'), null, 'no prompt=login without max_age');
    const combined = new URL((await fetch(`${h.url}/login?returnTo=%2Fadmin&max_age=5&acr_values=urn%3Aother`, { redirect: 'manual' })).headers.get('location')!);
    t.equal(combined.searchParams.get('max_age'), '5', 'the smaller max_age');
    t.equal(combined.searchParams.get('acr_values'), MFA, "a link cannot replace the route's acr list");
  });

  t.test('malformed acr_values or max_age: 400, no redirect', async (t) => {
    for (const query of ['max_age=-1', 'max_age=soon', 'acr_values=%22mfa%22', `acr_values=${'a%20'.repeat(11)}`, 'max_age=1&max_age=2', 'acr_values=']) {
      const response = await fetch(`${h.url}/login?returnTo=%2F&${query}`, { redirect: 'manual' });
      t.equal(response.status, 400, query);
      t.match(await response.json(), { error: 'bad_request' });
    }
  });

  t.test('met: a second factor gives the acr asked for; the session shows it and returnTo is reached', async (t) => {
    const before = Math.floor(Date.now() / 1000);
    const { callback, cookie } = await signInAt(`${h.url}/login?returnTo=%2Fadmin%2Fusers`, { user: 'alice', secondFactor: true });
    t.equal(callback.status, 302);
    t.equal(callback.location, '/admin/users');
    const session = await sessionOf(h.url, cookie!);
    t.equal(session.acr, MFA);
    t.ok(session.auth_time! >= before - 1 && session.auth_time! <= Date.now() / 1000 + 1, 'auth_time of this sign-in');
    t.match(asked.at(-1), { acr_values: MFA, max_age: 60, prompt: 'login' }, 'the AS was asked for it');
  });

  t.test('not met: a password-only sign-in for an MFA route gets 403, no session, the earlier session kept', async (t) => {
    const jar = new CookieJar();
    const first = await signInAt(`${h.url}/login?returnTo=%2F`, { user: 'alice', jar });
    t.equal(first.callback.status, 302);
    t.equal((await sessionOf(h.url, first.cookie!)).acr, PASSWORD, 'the first sign-in was password only');

    const page = await signInAt(`${h.url}/login?returnTo=%2Fadmin`, { user: 'alice', jar, secondFactor: false });
    t.equal(page.callback.status, 403);
    t.match(page.callback.body, /stronger sign-in is required/);
    t.equal(page.cookie, undefined, 'no new session cookie');
    t.equal(jar.get(h.url, 'session_id'), first.cookie!.split('=')[1], 'the browser keeps its session');
    t.equal((await sessionOf(h.url, first.cookie!)).acr, PASSWORD, 'which is still password only');
  });

  t.test('a requirement stripped from the authorization request is not accepted', async (t) => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login?returnTo=%2Fadmin`);
    const authorizationUrl = new URL(login.headers.get('location')!);
    for (const name of ['acr_values', 'max_age', 'prompt']) authorizationUrl.searchParams.delete(name);
    const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'alice');
    const callback = await jar.fetch(callbackUrl);
    t.equal(callback.status, 403, 'the pending login remembers what was asked');
    t.match(await callback.text(), /stronger sign-in is required/);
    t.equal(jar.get(h.url, 'session_id'), undefined);
  });

  t.test('a step-up that signs in another user replaces the session', async (t) => {
    const jar = new CookieJar();
    const first = await signInAt(`${h.url}/login?returnTo=%2F`, { user: 'alice', jar });
    const second = await signInAt(`${h.url}/login?returnTo=%2Fadmin`, { user: 'bob', jar, secondFactor: true });
    t.equal(second.callback.status, 302);
    t.not(second.cookie, first.cookie);
    t.match(await sessionOf(h.url, second.cookie!), { user: { sub: 'bob' }, acr: MFA });
  });

  t.test('max_age of a few seconds: a fresh sign-in meets it', async (t) => {
    const { callback, cookie } = await signInAt(`${h.url}/login?returnTo=%2Frecent`, { user: 'carol' });
    t.equal(callback.status, 302);
    t.match(asked.at(-1), { max_age: 2, prompt: 'login' });
    t.equal((await sessionOf(h.url, cookie!)).acr, PASSWORD, 'no acr asked, any acr passes');
  });
});

for (const alwaysAuthTime of [false, true]) {
  // Without auth_time openid-client's own max_age check refuses the ID token; with an old one only the gateway's (no clock tolerance) does.
  const which = alwaysAuthTime ? "an old auth_time (the gateway's own check)" : "no auth_time (openid-client's max_age check)";
  t.test(`an AS that ignores the step-up request: the old sign-in comes back and is refused, ${which}`, async (t) => {
    const h = await startRoutesHarness(({ web }) => [{ path: '/recent', upstream: web.url, stepUp: { maxAge: 1 } }, { path: '/', upstream: web.url }], {
      signInLevels: { password: PASSWORD, secondFactor: MFA, ignoreStepUp: true, alwaysAuthTime },
    });
    t.teardown(() => h.close());
    const jar = new CookieJar();
    const asJar = new CookieJar();
    const first = await signInAt(`${h.url}/login?returnTo=%2F`, { user: 'alice', jar, authorizationServerJar: asJar });
    t.equal(first.callback.status, 302);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const again = await signInAt(`${h.url}/login?returnTo=%2Frecent`, { user: 'alice', jar, authorizationServerJar: asJar });
    t.equal(again.authorizationUrl.searchParams.get('max_age'), '1', 'the gateway asked');
    t.equal(again.callback.status, 403, 'auth_time missing or older than max_age: not met');
    t.match(again.callback.body, /stronger sign-in is required/);
    t.equal(again.cookie, undefined);
    const refusal = h.logs.find((line) => line.msg === 'step-up not met');
    t.equal(refusal?.authTime === undefined, !alwaysAuthTime, alwaysAuthTime ? 'the ID token passed openid-client, the gateway refused it' : 'openid-client refused it');
    const acrOnly = await signInAt(`${h.url}/login?returnTo=%2F&acr_values=${encodeURIComponent(MFA)}`, { user: 'alice', jar, authorizationServerJar: asJar });
    t.equal(acrOnly.callback.status, 403, 'the AS signed in with the password-only session again: acr not met');
  });
}

t.test('through PAR: the step-up parameters are pushed, and verified the same way', async (t) => {
  const h = await startRoutesHarness(({ web }) => [{ path: '/admin', upstream: web.url, stepUp: { acr: [MFA], maxAge: 60 } }, { path: '/', upstream: web.url }], {
    signInLevels: { password: PASSWORD, secondFactor: MFA },
    pushedAuthorization: 'required',
  });
  t.teardown(() => h.close());
  const asked: Array<Record<string, unknown>> = [];
  h.as.provider.on('interaction.started', (ctx) => asked.push({ ...ctx.oidc.params }));
  const met = await signInAt(`${h.url}/login?returnTo=%2Fadmin`, { user: 'alice', secondFactor: true });
  t.equal(met.authorizationUrl.searchParams.get('acr_values'), null, 'nothing but client_id and request_uri in the front channel');
  t.ok(met.authorizationUrl.searchParams.get('request_uri'));
  t.match(asked.at(-1), { acr_values: MFA, max_age: 60, prompt: 'login' }, 'the AS got them through the pushed request');
  t.equal(met.callback.status, 302);
  const weak = await signInAt(`${h.url}/login?returnTo=%2Fadmin`, { user: 'alice', secondFactor: false });
  t.equal(weak.callback.status, 403);
});
