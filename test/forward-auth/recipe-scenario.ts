import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import { parse as parseYaml } from 'yaml';
import { freePort, startHarness, type Harness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer, signIn } from '../helpers/sign-in.js';
import { signOutAtAuthorizationServer } from '../lifecycle/logout-token.js';
import { httpSend } from '../helpers/http-request.js';
import { watchTokenEndpoint, type TokenEndpointWatch } from '../helpers/authorization-server-watch.js';
import { waitUntilExpired } from '../helpers/refresh.js';
import { RECIPES, type Addresses, type FrontProxy } from './front-proxy.js';

const NAVIGATION = { accept: 'text/html', 'sec-fetch-mode': 'navigate' };

interface RecipeOptions {
  /** `forwardAuth.redirect` as the recipe's comment says for this proxy. */
  redirect: boolean;
  /** What the proxy answers an API call without a session: 401 (passed on), or 302 (nginx's error_page sends every 401 to sign-in). */
  apiWithoutSession: number;
  /** Whether the recipe makes `/forward-auth` unreachable through the proxy (nginx `internal`). */
  hidesEndpoint: boolean;
  /** `server.trustProxy` in place of the recipe's address list, e.g. a hop count; default: the recipe's. */
  trustProxy?: number | string[];
  /** Whether the proxy passes gatehouse's refusal body to the browser (Caddy), or shows its own page (nginx). */
  passesRefusals?: boolean;
}

/** `rateLimit.max` in the scenario: sign-ins a client address may start per minute. */
const SIGN_IN_LIMIT = 5;

/** A recipe running: the cast of the harness and the proxy in front of the gateway, on the publicUrl's port. */
export interface RunningRecipe {
  h: Harness;
  proxy: FrontProxy;
  watch: TokenEndpointWatch;
}

/**
 * A real AS, the demo upstream (which validates the bearer at the AS),
 * gatehouse configured as docs/forward-auth/gatehouse.yaml says, and the
 * proxy from its recipe file in front, on the publicUrl's port. Every access
 * token lives `tokenTtl` seconds. Stopped by `t`'s teardown.
 */
export async function startRecipe(
  t: Test,
  start: (dir: string, addresses: Addresses) => Promise<FrontProxy>,
  options: {
    redirect: boolean;
    tokenTtl: number;
    authorizationServerHost?: '127.0.0.1' | 'localhost';
    /** See RecipeOptions. */
    trustProxy?: number | string[];
    /** `rateLimit.max`; default: the gateway's. */
    signInLimit?: number;
    /** Register publicUrl's `/backchannel-logout` at the AS, which then POSTs logout tokens there, through the proxy. */
    backchannelLogout?: boolean;
  },
): Promise<RunningRecipe> {
  const recipe = parseYaml(readFileSync(join(RECIPES, 'gatehouse.yaml'), 'utf8')) as {
    server: { trustProxy: string[] };
    forwardAuth: { trustedProxies: string[] };
    routes: unknown[];
  };
  const h = await startHarness({
    accessTokenTtl: options.tokenTtl,
    backchannelLogout: options.backchannelLogout ?? false,
    ...(options.authorizationServerHost ? { authorizationServerHost: options.authorizationServerHost } : {}),
    config: {
      server: { port: await freePort(), trustProxy: options.trustProxy ?? recipe.server.trustProxy },
      forwardAuth: { trustedProxies: recipe.forwardAuth.trustedProxies, redirect: options.redirect },
      // The recipe's routes, and an admin part no scenario user may pass (a browser's own forwarded path must not take them past it).
      routes: [{ path: '/api/admin', upstream: (recipe.routes[0] as { upstream: string }).upstream, allow: { claims: { groups: ['admins'] } } }, ...recipe.routes],
      ...(options.signInLimit === undefined ? {} : { rateLimit: { max: options.signInLimit, window: '1m' } }),
    },
  });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  // publicUrl's port is free: the gateway listens on another; the proxy takes it.
  const proxy = await start(h.dir, { port: Number(new URL(h.url).port), gateway: h.gateway.address, upstream: h.upstream.url });
  t.teardown(() => proxy.close());
  return { h, proxy, watch };
}

/**
 * One recipe end to end without a browser: a client without a session ends
 * on the AS sign-in page and comes back to the page it asked for; no
 * response it gets holds a token.
 */
export async function recipeScenario(t: Test, start: (dir: string, addresses: Addresses) => Promise<FrontProxy>, options: RecipeOptions): Promise<void> {
  // Every token lives 3 s, so a test can wait for one to expire.
  const { h, proxy, watch } = await startRecipe(t, start, {
    redirect: options.redirect,
    tokenTtl: 3,
    signInLimit: SIGN_IN_LIMIT,
    backchannelLogout: true,
    ...(options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy }),
  });

  const jar = new CookieJar();
  const seen: string[] = [];
  /**
   * A browser request to the site, its cookies kept in `jar`; every byte of
   * the answer is kept for the token check at the end. node:http, because
   * fetch() replaces Sec-Fetch-Mode with `cors`.
   */
  const browse = async (path: string | URL, headers: Record<string, string> = {}) => {
    const url = new URL(path, proxy.url);
    const cookie = jar.header(url);
    const response = await httpSend(proxy.url, { path: `${url.pathname}${url.search}`, headers: { ...headers, ...(cookie === undefined ? {} : { cookie }) } });
    const setCookie = response.headers['set-cookie'];
    if (setCookie !== undefined) jar.store(url, setCookie);
    const body = response.body.toString('utf8');
    seen.push(`${response.status} ${JSON.stringify(response.headers)}\n${body}`);
    const location = response.headers.location;
    return { status: response.status, location: location ?? null, body };
  };

  t.test('without a session: to the AS sign-in page and back to the page asked for', async (t) => {
    const hops: string[] = [];
    let answer = await browse('/api/me?from=bookmark', NAVIGATION);
    while (answer.location !== null && new URL(answer.location, proxy.url).origin === proxy.url) {
      hops.push(`${answer.status} ${answer.location}`);
      answer = await browse(answer.location, NAVIGATION);
    }
    t.equal(answer.status, 302, `${hops.join(' -> ')} -> AS\n${proxy.log()}`);
    const authorizationUrl = new URL(answer.location ?? '');
    t.equal(authorizationUrl.origin, new URL(h.as.url).origin, 'on to the authorization server');
    // Drives the AS's own login form: the browser is on the AS sign-in page.
    const callback = await approveAtAuthorizationServer(authorizationUrl, 'alice');
    t.equal(callback.origin, proxy.url, "the AS sends the browser back through the proxy (publicUrl's callback)");
    const back = await browse(callback, NAVIGATION);
    t.equal(back.status, 302);
    t.equal(back.location, '/api/me?from=bookmark', 'to the page first asked for');
    const page = await browse(back.location!, NAVIGATION);
    t.equal(page.status, 200, proxy.log());
    t.match(JSON.parse(page.body), { sub: 'alice' }, 'the application knows the user');
    const received = h.upstream.received.at(-1)!;
    t.match(received, { url: '/api/me?from=bookmark', active: true, sub: 'alice' }, 'it got a bearer token the AS vouches for');
    t.equal(received.headers['x-forwarded-user'], 'alice', 'and the identity header the proxy copied');
  });

  t.test('public, optional and required routes: exactly the headers the route sets, the cookies without the gateway\'s, nothing else', async (t) => {
    const token = () => `Bearer ${watch.issued.at(-1)!.accessToken}`;
    // Headers the proxy itself adds or passes from the browser's request (httpSend sends only these and the cookie).
    const proxyOwn = new Set(['host', 'connection', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'accept', 'accept-encoding', 'user-agent', 'via', 'content-length']);
    const cases: Array<[string, boolean, Record<string, string | (() => string)>]> = [
      ['/assets/app.js', false, { cookie: 'theme=dark' }],
      ['/assets/app.js', true, { cookie: 'theme=dark' }],
      ['/blog/post', false, { cookie: 'theme=dark' }],
      ['/blog/post', true, { cookie: 'theme=dark', authorization: token, 'x-forwarded-user': 'alice' }],
      ['/api/me', true, { cookie: 'theme=dark', authorization: token, 'x-forwarded-user': 'alice', 'x-forwarded-email': 'alice@example.com' }],
    ];
    for (const [path, signedIn, expected] of cases) {
      const session = jar.header(new URL(path, proxy.url));
      const cookie = signedIn ? `theme=dark; ${session}` : 'theme=dark';
      const before = h.upstream.received.length;
      const answer = await httpSend(proxy.url, { path, headers: { accept: 'application/json', cookie } });
      seen.push(`${answer.status} ${JSON.stringify(answer.headers)}\n${answer.body.toString('latin1')}`);
      const label = `${path} ${signedIn ? 'signed in' : 'without a session'}`;
      t.equal(h.upstream.received.length, before + 1, `${label}: reached the application\n${proxy.log()}`);
      const { headers } = h.upstream.received.at(-1)!;
      const gatewaySet = Object.fromEntries(Object.entries(headers).filter(([name]) => !proxyOwn.has(name)));
      const wanted = Object.fromEntries(Object.entries(expected).map(([name, value]) => [name, typeof value === 'function' ? value() : value]));
      t.strictSame(gatewaySet, wanted, `${label}: exactly these`);
      for (const [name, value] of Object.entries(headers)) {
        t.notMatch(String(value), /\{[a-z.]+|^$/i, `${label}: ${name} is no placeholder and not empty`);
      }
    }
  });

  if (options.passesRefusals) {
    t.test('a refused navigation gets the page proxy mode shows: 403 naming the user, with sign-out', async (t) => {
      const page = await browse('/api/admin/users', NAVIGATION);
      t.equal(page.status, 403, proxy.log());
      t.match(page.body, /<!doctype html>/i, 'an HTML page, not {"error":"forbidden"}');
      t.match(page.body, 'You are signed in as alice');
      t.match(page.body, /href="\/logout"[^>]*>Sign out</);
      const api = await browse('/api/admin/users', { accept: 'application/json' });
      t.equal(api.status, 403);
      t.same(JSON.parse(api.body), { error: 'forbidden' }, 'an API call still gets JSON');
      const logged = h.logs.filter((line) => line.msg === 'request completed' && line.route === 'forward-auth' && line.status === 403);
      t.match(logged.at(-1), { originalMethod: 'GET', originalPath: '/api/admin/users', code: 'GH_ERR_NOT_ALLOWED' }, 'the access-log line names the request decided');
    });
  }

  t.test('a browser cannot choose its own token or identity', async (t) => {
    const answer = await browse('/api/me', { authorization: 'Bearer forged', 'x-forwarded-user': 'mallory', 'x-forwarded-email': 'mallory@evil.example' });
    t.equal(answer.status, 200);
    const received = h.upstream.received.at(-1)!;
    t.equal(received.headers.authorization, `Bearer ${watch.issued.at(-1)!.accessToken}`, "the user's token, not the browser's");
    t.equal(received.headers['x-forwarded-user'], 'alice');
    t.equal(received.headers['x-forwarded-email'], 'alice@example.com');
  });

  t.test("a browser's own copies of both forms of the original request: never what is decided, never what the application acts on", async (t) => {
    const received = h.upstream.received.length;
    const spoofed = { 'x-forwarded-uri': '/api/me', 'x-forwarded-method': 'GET', 'x-original-url': '/api/me', 'x-original-method': 'GET' };
    const admin = await browse('/api/admin/users', spoofed);
    t.equal(admin.status, 403, `decided on its own path, under /api/admin, whose allow refuses alice\n${proxy.log()}`);
    t.equal(h.upstream.received.length, received, 'nothing reached the application');
    const encoded = await browse('/%61pi/admin/users');
    t.equal(encoded.status, 403, `an encoded letter is decoded before the route table: still /api/admin\n${proxy.log()}`);
    const slash = await browse('/api%2Fadmin/users');
    t.not(slash.status, 200, 'an encoded "/" is refused (400 from gatehouse; nginx turns an unexpected status into 500)');
    t.equal(h.upstream.received.length, received, 'neither reached the application');
    const overrides = { 'x-rewrite-url': '/api/admin/users', 'x-http-method-override': 'DELETE', 'x-http-method': 'DELETE', 'x-method-override': 'DELETE' };
    const me = await browse('/api/me', { ...spoofed, 'x-original-url': '/api/admin/users', ...overrides });
    t.equal(me.status, 200, `the recipe removes the form its proxy does not set, so nothing disagrees\n${proxy.log()}`);
    const got = h.upstream.received.at(-1)!;
    t.equal(got.url, '/api/me');
    for (const name of ['x-original-url', 'x-original-method', ...Object.keys(overrides)]) t.equal(got.headers[name], undefined, `${name} never reaches the application`);
  });

  t.test('an API call without a session, and the endpoint from outside', async (t) => {
    const api = await fetch(new URL('/api/me', proxy.url), { headers: { accept: 'application/json' }, redirect: 'manual' });
    seen.push(`${api.status} ${JSON.stringify([...api.headers])}\n${await api.text()}`);
    t.equal(api.status, options.apiWithoutSession);
    const stranger = await httpSend(h.gateway.address, { path: '/forward-auth', localAddress: '127.0.0.2', headers: { cookie: jar.header(proxy.url), 'x-forwarded-uri': '/api/me' } });
    t.equal(stranger.status, 404, 'asked from 127.0.0.2, outside trustedProxies: 404');
    seen.push(`${stranger.status} ${JSON.stringify(stranger.headers)}\n${stranger.body.toString('latin1')}`);
    if (options.hidesEndpoint) {
      t.equal((await browse('/forward-auth')).status, 404, 'through the proxy: not reachable');
    }
  });

  t.test('20 concurrent requests across a token expiry: one refresh', async (t) => {
    await waitUntilExpired(h, watch.issued.at(-1)!.accessToken!);
    const refreshes = h.as.grants.refreshToken;
    const received = h.upstream.received.length;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => browse(`/api/me?i=${i}`)));
    t.strictSame(new Set(answers.map((answer) => answer.status)), new Set([200]), proxy.log());
    t.equal(h.as.grants.refreshToken - refreshes, 1, 'exactly one refresh grant at the AS');
    const refreshed = watch.issued.at(-1)!.accessToken;
    const sent = h.upstream.received.slice(received);
    t.equal(sent.length, 20);
    t.ok(sent.every((request) => request.headers.authorization === `Bearer ${refreshed}` && request.active), 'every request carried the one new token');
  });

  t.test('signing out at the authorization server: its logout token reaches gatehouse through the proxy', async (t) => {
    const deliveries: string[] = [];
    h.as.provider.on('backchannel.success', () => deliveries.push('ok'));
    h.as.provider.on('backchannel.error', (_ctx: unknown, err: Error) => deliveries.push(`error: ${err.message}`));
    const atAs = new CookieJar();
    const dave = await signIn(proxy.url, { user: 'dave', authorizationServerJar: atAs });
    const me = () => httpSend(proxy.url, { path: '/api/me', headers: { cookie: dave.cookie, accept: 'application/json' } });
    t.equal((await me()).status, 200, 'signed in through the proxy');
    await signOutAtAuthorizationServer(h.as, atAs);
    t.strictSame(deliveries, ['ok'], `the AS POSTed to publicUrl's /backchannel-logout and gatehouse answered 200\n${proxy.log()}`);
    const after = await me();
    t.not(after.status, 200, "dave's gateway session has ended");
    seen.push(`${after.status} ${JSON.stringify(after.headers)}\n${after.body.toString('latin1')}`);
    t.equal((await browse('/api/me')).status, 200, "alice's session (another AS session) is untouched");
  });

  t.test('a client claiming other addresses in X-Forwarded-For is still rate-limited as itself', async (t) => {
    // Clients on 127.0.0.2 and 127.0.0.3: not the proxy's address (127.0.0.1,
    // trusted), and not the address the rest of the scenario signs in from.
    const login = async (from: string, claimed: string) => {
      const answer = await httpSend(proxy.url, { path: '/login', localAddress: from, headers: { 'x-forwarded-for': claimed, 'x-real-ip': claimed } });
      seen.push(`${answer.status} ${JSON.stringify(answer.headers)}\n${answer.body.toString('latin1')}`);
      return answer.status;
    };
    for (let i = 1; i <= SIGN_IN_LIMIT; i++) t.equal(await login('127.0.0.2', `203.0.113.${i}`), 302, `sign-in ${i} of ${SIGN_IN_LIMIT}: on to the AS\n${proxy.log()}`);
    t.equal(await login('127.0.0.2', '198.51.100.7'), 429, 'one more, claiming yet another address: 429, counted as the real client');
    t.equal(await login('127.0.0.2', '127.0.0.3'), 429, "claiming another client's address does not help either");
    t.equal(await login('127.0.0.3', '127.0.0.2'), 302, 'that other client is not limited, even when it claims the limited address');
  });

  t.test('no response the browser got holds a token', async (t) => {
    const tokens = watch.issued.flatMap((issued) => [issued.accessToken, issued.refreshToken]).filter((token) => token !== undefined);
    t.ok(tokens.length >= 4, 'tokens were issued');
    const everything = seen.join('\n');
    t.ok(seen.length >= 27, `${seen.length} responses looked at`);
    for (const token of tokens) t.notOk(everything.includes(token!), 'not a byte of any access or refresh token');
  });
}
