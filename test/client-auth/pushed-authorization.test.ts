import t from 'tap';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { signIn, startLogin } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { decodeJwt, watchClientRequests } from '../helpers/client-requests.js';
import { TestClock } from '../helpers/clock.js';

/**
 * README "Client authentication and sender-constrained tokens", PAR (RFC
 * 9126): with `provider.pushedAuthorization: auto` (the default) and an AS
 * that offers it, or `required`, /login pushes the authorization request
 * over the back channel and redirects with only `client_id` and
 * `request_uri`; state, PKCE and nonce are those of a plain request.
 */

t.test('auto: the request is pushed, the redirect carries only client_id and request_uri, and the whole cycle works', async (t) => {
  const clock = new TestClock();
  const h = await startHarness({ pushedAuthorization: 'on', clock });
  t.teardown(() => h.close());
  const seen = watchClientRequests(h.asProxy);
  const watch = watchTokenEndpoint(h.as);

  const { authorizationUrl } = await startLogin(h.url, { returnTo: '/orders' });
  t.strictSame([...authorizationUrl.searchParams.keys()].sort(), ['client_id', 'request_uri'], 'nothing else travels through the browser');
  t.equal(authorizationUrl.searchParams.get('client_id'), CLIENT_ID);
  t.match(authorizationUrl.searchParams.get('request_uri'), /^urn:ietf:params:oauth:request_uri:/);
  const pushed = seen.find((r) => r.path === '/request');
  t.ok(pushed, 'the AS received a pushed authorization request');
  t.equal(pushed?.status, 201, 'and accepted it');
  t.match(pushed?.params, {
    response_type: 'code',
    redirect_uri: `${h.url}/callback`,
    scope: 'openid profile email offline_access',
    code_challenge_method: 'S256',
    code_challenge: /^[A-Za-z0-9_-]{43}$/,
    state: /^[A-Za-z0-9_-]{20,}$/,
    nonce: /^[A-Za-z0-9_-]{20,}$/,
    client_secret: h.clientSecret,
  }, 'state, PKCE S256 and nonce are pushed, with the client authenticated as at the token endpoint');

  const { cookie, location } = await signIn(h.url, { user: 'alice', returnTo: '/orders' });
  t.equal(location, '/orders', 'the callback sends the browser to its returnTo');
  const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(me.status, 200);
  t.match(await me.json(), { sub: 'alice' });

  clock.advance(10 * 60_000);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'works after a refresh');
  t.equal(h.as.grants.refreshToken, 1);
  const refreshToken = watch.issued.at(-1)!.refreshToken!;
  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' })).status, 302);
  t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'logout revoked the refresh token');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401);
});

t.test('a state the pushed request carried is still checked at the callback', async (t) => {
  const h = await startHarness({ pushedAuthorization: 'required' });
  t.teardown(() => h.close());
  const first = await signIn(h.url, { user: 'bob' });
  t.equal(first.callbackStatus, 302);
  // A callback with a forged state, in a browser that started a login: refused before any token request.
  const watch = watchTokenEndpoint(h.as);
  const { loginCookies } = await startLogin(h.url);
  const cookie = loginCookies.map((c) => c.split(';')[0]).join('; ');
  const forged = await fetch(`${h.url}/callback?code=abc&state=forged-state-value`, { headers: { cookie } });
  t.equal(forged.status, 400);
  t.equal(watch.codeExchanges, 0, 'no token request');
});

t.test('private_key_jwt and a PAR-required client: the pushed request is authenticated with an assertion', async (t) => {
  const h = await startHarness({ authMethod: 'private_key_jwt', pushedAuthorization: 'required', config: { provider: { pushedAuthorization: 'required' } } });
  t.teardown(() => h.close());
  const seen = watchClientRequests(h.asProxy);
  const { cookie } = await signIn(h.url, { user: 'carol' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  const pushed = seen.find((r) => r.path === '/request');
  t.equal(pushed?.status, 201);
  t.equal(pushed?.params.client_secret, undefined);
  t.equal(decodeJwt(String(pushed?.params.client_assertion)).payload.iss, CLIENT_ID, 'a client assertion authenticates the push');
});

t.test('the AS refuses a plain authorization request from a PAR-required client', async (t) => {
  const h = await startHarness({ pushedAuthorization: 'required', config: { provider: { pushedAuthorization: 'off' } } });
  t.teardown(() => h.close());
  const { authorizationUrl } = await startLogin(h.url);
  t.ok(authorizationUrl.searchParams.get('state'), 'with `off` the gateway sends a plain request');
  const answer = await fetch(authorizationUrl, { redirect: 'manual' });
  await answer.arrayBuffer();
  t.equal(answer.status, 303, 'the AS answers at once, with no login form');
  const back = new URL(answer.headers.get('location')!);
  t.equal(`${back.origin}${back.pathname}`, `${h.url}/callback`, 'back to the client');
  t.equal(back.searchParams.get('error'), 'invalid_request', 'with an error: the request is refused');
  t.match(back.searchParams.get('error_description'), /Pushed Authorization Request must be used/i);
  const callback = await fetch(back, { headers: { accept: 'application/json' } });
  t.equal(callback.status, 400, 'and the gateway says sign-in did not complete');
});

t.test('auto without a PAR endpoint sends a plain request; required without one fails clearly', async (t) => {
  const plain = await startHarness();
  t.teardown(() => plain.close());
  const { authorizationUrl } = await startLogin(plain.url);
  t.equal(authorizationUrl.searchParams.get('redirect_uri'), `${plain.url}/callback`, 'auto: the AS offers no PAR, so the request is plain');
  t.equal(authorizationUrl.searchParams.get('request_uri'), null);

  const strict = await startHarness({ config: { provider: { pushedAuthorization: 'required' } } });
  t.teardown(() => strict.close());
  const login = await fetch(`${strict.url}/login`, { redirect: 'manual', headers: { accept: 'application/json' } });
  t.equal(login.status, 502, 'required, but the AS offers no PAR endpoint');
  t.match(await login.json(), { error: 'sign_in_failed' });
  t.equal(login.headers.getSetCookie().length, 0, 'no pending login is kept');
});

t.test('an AS that is down when the request is pushed gives 503, and sign-in works once it is back', async (t) => {
  const h = await startHarness({ pushedAuthorization: 'on' });
  t.teardown(() => h.close());
  h.asProxy.mode = 'down';
  const login = await fetch(`${h.url}/login`, { redirect: 'manual', headers: { accept: 'application/json' } });
  t.equal(login.status, 503);
  t.match(await login.json(), { error: 'provider_unavailable' });
  h.asProxy.mode = 'up';
  const { cookie } = await signIn(h.url, { user: 'dave' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
});

t.test('a client the AS refuses at the push gets 502, and its reason stays in the log', async (t) => {
  const h = await startHarness({ pushedAuthorization: 'on', config: { provider: { clientSecret: 'not-the-secret' } } });
  t.teardown(() => h.close());
  const login = await fetch(`${h.url}/login`, { redirect: 'manual', headers: { accept: 'application/json' } });
  t.equal(login.status, 502);
  const body = (await login.json()) as Record<string, unknown>;
  t.equal(body.error, 'sign_in_failed');
  t.notMatch(JSON.stringify(body), /invalid_client/, "the AS's own words are not echoed");
  t.ok(h.logs.some((line) => line.msg === 'pushed authorization request refused' && (line.failure as { error?: string }).error === 'invalid_client'));
  t.notOk(h.logText().includes('not-the-secret'), 'the secret is not logged');
});
