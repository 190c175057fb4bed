import t, { type Test } from 'tap';
import { startHarness, type Harness } from '../helpers/harness.js';
import { approveAtAuthorizationServer, signIn } from '../helpers/sign-in.js';
import { httpSend, type RawResponse } from '../helpers/http-request.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { shortLoginTokens, waitUntilExpired } from '../helpers/refresh.js';
import { problemsOf, withKeys } from '../config/config-helpers.js';
import { redisMissing, startRedis } from '../helpers/redis.js';

/**
 * README "Behind nginx, Caddy, Traefik or Envoy", the forward-auth endpoint
 * asked directly as a proxy would (the recipes with real nginx and Caddy are
 * in nginx.test.ts and caddy.test.ts). 127.0.0.1 is the trusted proxy,
 * 127.0.0.2 anyone else.
 */
const FORWARD_AUTH = { trustedProxies: ['127.0.0.1/32'] };

/** Asks /forward-auth about `uri` as Traefik and Caddy do (X-Forwarded-*), from `from`. */
function ask(h: Harness, uri: string, headers: Record<string, string> = {}, from = '127.0.0.1'): Promise<RawResponse> {
  return httpSend(h.url, {
    path: '/forward-auth',
    localAddress: from,
    headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': uri, ...headers },
  });
}

function holdsNoToken(t: Test, answer: RawResponse, tokens: Array<string | undefined>): void {
  const bytes = `${JSON.stringify(answer.headers)}\n${answer.body.toString('latin1')}`;
  for (const token of tokens) if (token !== undefined) t.notOk(bytes.includes(token), 'the answer holds no token');
  t.notOk('authorization' in answer.headers, 'no Authorization header');
}

t.test('the one implicit route: who may ask, and what each answer carries', async (t) => {
  const h = await startHarness({ config: { forwardAuth: FORWARD_AUTH } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const { accessToken, refreshToken } = watch.issued.at(-1)!;

  const allowed = await ask(h, '/api/me?x=1', { cookie });
  t.equal(allowed.status, 200);
  t.equal(allowed.headers.authorization, `Bearer ${accessToken}`, 'the access token, for the proxy to copy upstream');
  t.equal(allowed.headers['cache-control'], 'no-store');
  t.match(await introspect(h.as, accessToken!, 'access_token'), { active: true, sub: 'alice' }, 'a token the AS vouches for');
  const upstream = await fetch(`${h.upstream.url}/api/me`, { headers: { authorization: allowed.headers.authorization! } });
  t.match(await upstream.json(), { sub: 'alice' }, 'the upstream accepts it as alice');

  const stranger = await ask(h, '/api/me', { cookie }, '127.0.0.2');
  t.equal(stranger.status, 404, 'from an address outside trustedProxies the endpoint does not exist');
  holdsNoToken(t, stranger, [accessToken, refreshToken]);

  const anonymous = await ask(h, '/api/me');
  t.equal(anonymous.status, 401);
  t.same(JSON.parse(anonymous.body.toString('utf8')), { error: 'unauthorized' });
  const navigation = await ask(h, '/api/me', { 'sec-fetch-mode': 'navigate', accept: 'text/html' });
  t.equal(navigation.status, 401, 'without forwardAuth.redirect a navigation gets 401 too (nginx turns it into a redirect)');
  t.match(navigation.headers['content-type'], /^text\/html/, 'the sign-in page proxy mode shows, for proxies that pass it on (Caddy, Traefik, Envoy)');
  t.match(navigation.body.toString('utf8'), `href="${h.url}/login?returnTo=%2Fapi%2Fme"`, 'its sign-in link comes back to the original page');
  const decided = h.logs.filter((line) => line.msg === 'request completed' && line.route === 'forward-auth').at(-1);
  t.match(decided, { method: 'GET', path: '/forward-auth', originalMethod: 'GET', originalPath: '/api/me', status: 401 }, 'the access-log line names the request decided');

  const crossSite = await ask(h, '/api/echo', { cookie, 'x-forwarded-method': 'POST', origin: 'https://evil.example' });
  t.equal(crossSite.status, 403, 'a cross-site POST, judged by the original method');
  holdsNoToken(t, crossSite, [accessToken, refreshToken]);
  const sameSite = await ask(h, '/api/echo', { cookie, 'x-forwarded-method': 'POST', origin: new URL(h.url).origin });
  t.equal(sameSite.status, 200, 'a same-origin POST passes');

  const nginxStyle = await httpSend(h.url, {
    path: '/forward-auth',
    headers: { 'x-original-method': 'DELETE', 'x-original-url': 'https://app.example.com/api/echo', 'sec-fetch-site': 'cross-site', cookie },
  });
  t.equal(nginxStyle.status, 403, "nginx's X-Original-Method and X-Original-URL are read the same way");
  const envoyStyle = await httpSend(h.url, { path: '/forward-auth/api/me?x=1', headers: { cookie } });
  t.equal(envoyStyle.headers.authorization, `Bearer ${accessToken}`, "Envoy's ext_authz form: the original path appended to the endpoint's");
  const envoyCrossSite = await httpSend(h.url, { method: 'DELETE', path: '/forward-auth/api/echo', headers: { cookie, origin: 'https://evil.example' } });
  t.equal(envoyCrossSite.status, 403, 'with the original method');
  t.equal((await httpSend(h.url, { path: '/forward-auth/api/me', localAddress: '127.0.0.2', headers: { cookie } })).status, 404, 'that form too is 404 for others');
  const noUri = await httpSend(h.url, { path: '/forward-auth', headers: { cookie } });
  t.equal(noUri.status, 400, 'without the original URI nothing is guessed');
  holdsNoToken(t, noUri, [accessToken, refreshToken]);
  t.equal((await ask(h, '/public/../api/me', { cookie })).status, 400, 'a path with dot segments is refused');

  const stale = await ask(h, '/api/me', { cookie: 'session_id=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
  t.equal(stale.status, 401);
  t.match(String(stale.headers['set-cookie']), /^session_id=;/, 'an unknown session cookie is cleared');
});

t.test('forwardAuth.redirect: a navigation goes to sign-in on publicUrl with the original path, never to the forwarded host', async (t) => {
  const h = await startHarness({ config: { forwardAuth: { ...FORWARD_AUTH, redirect: true } } });
  t.teardown(() => h.close());
  const navigate = { 'sec-fetch-mode': 'navigate', 'x-forwarded-host': 'evil.example' };

  const page = await ask(h, '/orders/7?tab=items&x=%2F', navigate);
  t.equal(page.status, 302);
  t.equal(page.headers.location, `${h.url}/login?returnTo=${encodeURIComponent('/orders/7?tab=items&x=%2F')}`);
  for (const uri of ['//evil.example/x', '/%0d%0aLocation:%20https://evil.example']) {
    const answer = await ask(h, uri, navigate);
    t.equal(answer.headers.location, `${h.url}/login?returnTo=%2F`, `${uri}: returnTo falls back to /`);
  }
  t.equal((await ask(h, '/\\evil.example', navigate)).status, 400, 'a backslash, raw or encoded: refused outright');
  t.equal((await ask(h, '/%2F%2Fevil.example', navigate)).status, 400, 'an encoded "/": refused by the path rule (README "Routes")');
  t.equal((await ask(h, '/%5Cevil.example', navigate)).status, 400);
  const absolute = await httpSend(h.url, { path: '/forward-auth', headers: { 'x-original-url': 'https://evil.example/next', accept: 'text/html' } });
  t.equal(absolute.headers.location, `${h.url}/login?returnTo=%2Fnext`, 'an absolute X-Original-URL gives its path only, never its host');

  t.equal((await ask(h, '/api/me', { accept: 'application/json' })).status, 401, 'an API call still gets 401');
  t.equal((await ask(h, '/api/echo', { 'x-forwarded-method': 'POST', 'sec-fetch-mode': 'navigate' })).status, 401, 'a POST navigation is not redirected');
});

t.test('20 concurrent forward-auth requests across an expiry: one refresh; the AS down: 503 without a token', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2), config: { forwardAuth: FORWARD_AUTH } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const alice = await signIn(h.url, { user: 'alice' });
  const first = watch.issued.at(-1)!;
  await waitUntilExpired(h, first.accessToken!);

  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(h, `/api/me?i=${i}`, { cookie: alice.cookie })));
  t.strictSame(new Set(answers.map((answer) => answer.status)), new Set([200]));
  t.equal(h.as.grants.refreshToken, 1, 'exactly one refresh grant at the AS');
  const refreshed = watch.issued.at(-1)!.accessToken;
  t.not(refreshed, first.accessToken);
  t.ok(answers.every((answer) => answer.headers.authorization === `Bearer ${refreshed}`), 'every answer carries the one new token');

  const bob = await signIn(h.url, { user: 'bob' });
  const bobTokens = watch.issued.at(-1)!;
  await waitUntilExpired(h, bobTokens.accessToken!);
  h.asProxy.mode = 'down';
  const down = await ask(h, '/api/me', { cookie: bob.cookie, accept: 'text/html', 'sec-fetch-mode': 'navigate' });
  t.equal(down.status, 503, 'a stale token and the AS unreachable: 503');
  holdsNoToken(t, down, [bobTokens.accessToken, bobTokens.refreshToken]);
  h.asProxy.mode = 'up';
  t.equal((await ask(h, '/api/me', { cookie: bob.cookie })).status, 200, 'the session was kept: fine once the AS is back');
});

t.test('allow decides on the claims of the last refresh: a group taken away at the AS refuses the user once the token is refreshed', async (t) => {
  const claims: Record<string, Record<string, unknown>> = { carol: { groups: ['admins'] } };
  const h = await startHarness({
    accessTokenTtl: shortLoginTokens(2),
    extraClaims: claims,
    config: {
      forwardAuth: FORWARD_AUTH,
      routes: [{ path: '/', upstream: 'http://127.0.0.1:9', auth: 'required', allow: { claims: { groups: ['admins'] } } }],
    },
  });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'carol' });
  t.equal((await ask(h, '/admin/users', { cookie })).status, 200, 'an admin at sign-in passes');

  claims.carol = { groups: ['staff'] };
  await waitUntilExpired(h, watch.issued.at(-1)!.accessToken!);
  const after = await ask(h, '/admin/users', { cookie });
  t.equal(h.as.grants.refreshToken, 1, 'the stale token was refreshed');
  t.equal(after.status, 403, 'the refreshed ID token no longer holds the group: 403, not the claims of the sign-in');
  holdsNoToken(t, after, [watch.issued.at(-1)!.accessToken]);
});

t.test('the route table applies to the original path', async (t) => {
  const h = await startHarness({
    config: {
      forwardAuth: FORWARD_AUTH,
      routes: [
        { path: '/assets', upstream: 'http://127.0.0.1:9', auth: 'public' },
        { path: '/', upstream: 'http://127.0.0.1:9', auth: 'optional', headers: { 'X-Forwarded-User': 'sub' } },
        { path: '/admin', upstream: 'http://127.0.0.1:9', auth: 'required', allow: { claims: { sub: ['bob'] } } },
        { path: '/api', upstream: 'http://127.0.0.1:9', auth: 'required', headers: { 'X-Forwarded-User': 'sub', 'X-Forwarded-Email': 'email' } },
      ],
    },
  });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const { accessToken } = watch.issued.at(-1)!;

  const api = await ask(h, '/api/orders', { cookie, 'x-forwarded-user': 'mallory' });
  t.equal(api.status, 200);
  t.equal(api.headers.authorization, `Bearer ${accessToken}`);
  t.equal(api.headers['x-forwarded-user'], 'alice', "the route's identity headers, from the user's claims");
  t.match(api.headers['x-forwarded-email'], /@/);

  const asset = await ask(h, '/assets/app.css', { cookie });
  t.equal(asset.status, 200, 'a public route passes');
  t.notOk('authorization' in asset.headers, 'without a token');
  t.notOk('x-forwarded-user' in asset.headers, 'and without identity headers');

  const home = await ask(h, '/');
  t.equal(home.status, 200, 'an optional route without a session passes');
  t.notOk('authorization' in home.headers);
  const homeSignedIn = await ask(h, '/', { cookie });
  t.equal(homeSignedIn.headers.authorization, `Bearer ${accessToken}`, 'signed in on an optional route: the token');
  t.equal(homeSignedIn.headers['x-forwarded-user'], 'alice');

  const admin = await ask(h, '/admin/users', { cookie });
  t.equal(admin.status, 403, 'allow not matched: 403');
  t.strictSame(JSON.parse(admin.body.toString('utf8')), { error: 'forbidden' }, 'exactly {"error":"forbidden"} (README "Routes")');
  holdsNoToken(t, admin, [accessToken]);
  t.equal((await ask(h, '/api/orders')).status, 401, 'a required route without a session: 401');
});

t.test('routes without `/`: an original URL no route matches gets 404, signed in or not, whatever the form', async (t) => {
  const h = await startHarness({
    config: {
      forwardAuth: { ...FORWARD_AUTH, redirect: true },
      routes: [
        { path: '/assets', upstream: 'http://127.0.0.1:9', auth: 'public' },
        { path: '/docs', upstream: 'http://127.0.0.1:9', auth: 'optional' },
        { path: '/api', upstream: 'http://127.0.0.1:9', auth: 'required' },
      ],
    },
  });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const { accessToken, refreshToken } = watch.issued.at(-1)!;
  t.equal((await ask(h, '/api/orders', { cookie })).headers.authorization, `Bearer ${accessToken}`, 'a matched route still passes');
  t.equal((await ask(h, '/assets/app.css')).status, 200);

  const navigate = { 'sec-fetch-mode': 'navigate', accept: 'text/html' };
  for (const uri of ['/', '/apix', '/nothing?x=1', '/Api/orders']) {
    for (const [who, headers] of [['signed in', { cookie }], ['anonymous', {}], ['anonymous navigation', navigate], ['signed-in navigation', { ...navigate, cookie }]] as const) {
      const answer = await ask(h, uri, headers);
      t.equal(answer.status, 404, `${uri}, ${who}: 404, not a pass, a 401 or a redirect to sign-in`);
      // As proxy mode answers: the HTML page for a navigation, JSON otherwise.
      if ('sec-fetch-mode' in headers) t.match(answer.body.toString('utf8'), /<!doctype html>[\s\S]*Nothing is served at this path/i);
      else t.match(JSON.parse(answer.body.toString('utf8')), { error: 'not_found' });
      t.notOk('location' in answer.headers, 'no redirect');
      holdsNoToken(t, answer, [accessToken, refreshToken]);
    }
  }
  const nginxStyle = await httpSend(h.url, { path: '/forward-auth', headers: { 'x-original-method': 'GET', 'x-original-url': 'https://app.example.com/nothing', cookie } });
  t.equal(nginxStyle.status, 404, "nginx's X-Original-URL form");
  holdsNoToken(t, nginxStyle, [accessToken, refreshToken]);
  const envoyStyle = await httpSend(h.url, { path: '/forward-auth/nothing', headers: { cookie } });
  t.equal(envoyStyle.status, 404, "Envoy's ext_authz form");
  holdsNoToken(t, envoyStyle, [accessToken, refreshToken]);
});

t.test('config: trustedProxies must be addresses/CIDRs and cannot go with DPoP; without it the path is proxied as any other', async (t) => {
  t.strictSame(problemsOf(withKeys({ forwardAuth: { trustedProxies: ['10.0.0.0/8', 'ingress'] } })), [
    'forwardAuth.trustedProxies[1]: ingress is not an IP address or a CIDR such as 10.0.0.0/8',
  ]);
  t.strictSame(problemsOf(withKeys({ forwardAuth: { trustedProxies: ['10.0.0.1'] }, provider: { dpop: true } })), [
    'forwardAuth.trustedProxies: forward-auth cannot go with provider.dpop (the proxy, not gatehouse, sends the upstream request a proof would be for); turn one of them off',
  ]);
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const answer = await ask(h, '/api/me', { cookie });
  t.equal(h.upstream.received.at(-1)?.url, '/forward-auth', 'no such endpoint: the request went upstream as a proxied path');
  t.notOk('authorization' in answer.headers, 'and no token came back');
});

t.test('the session store down: 503 without a token', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const h = await startHarness({ store: redis.url, config: { forwardAuth: FORWARD_AUTH } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  t.equal((await ask(h, '/api/me', { cookie })).status, 200);
  await redis.stop();
  const down = await ask(h, '/api/me', { cookie });
  t.equal(down.status, 503);
  t.same(JSON.parse(down.body.toString('utf8')), { error: 'store_unavailable' });
  holdsNoToken(t, down, [watch.issued.at(-1)!.accessToken, watch.issued.at(-1)!.refreshToken]);
});

t.test("the login path takes the return URL from X-Original-URL only from a trusted proxy (nginx's error_page 401)", async (t) => {
  const h = await startHarness({ config: { forwardAuth: FORWARD_AUTH } });
  t.teardown(() => h.close());
  const returnsTo = async (from: string, originalUrl: string) => {
    const login = await httpSend(h.url, { path: '/login', localAddress: from, headers: { 'x-original-url': originalUrl } });
    const callback = await approveAtAuthorizationServer(new URL(login.headers.location!), 'alice');
    const cookie = (login.headers['set-cookie'] ?? []).map((line) => line.split(';')[0]).join('; ');
    const answer = await fetch(callback, { headers: { cookie }, redirect: 'manual' });
    return answer.headers.get('location');
  };
  t.equal(await returnsTo('127.0.0.1', '/reports?year=2026&q=a%26b'), '/reports?year=2026&q=a%26b', 'from the proxy: back to the page asked for');
  t.equal(await returnsTo('127.0.0.2', '/reports'), '/', 'from anyone else: ignored');
  t.equal(await returnsTo('127.0.0.1', '//evil.example/'), '/', 'and judged by the returnTo rules');
  t.equal(await returnsTo('127.0.0.1', '/login'), '/', 'the login path itself is no page to return to');
});
