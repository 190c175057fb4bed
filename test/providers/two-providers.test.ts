import t from 'tap';
import { CLIENT_ID, startHarness, type Harness } from '../helpers/harness.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { httpSend, type RawResponse } from '../helpers/http-request.js';
import { approveAtAuthorizationServer, startLogin } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { introspect, watchTokenEndpoint, type TokenEndpointWatch } from '../helpers/authorization-server-watch.js';
import { postLogoutToken, resignedWithForeignKey, signedByAs } from '../lifecycle/logout-token.js';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { openIdUserKey } from '../../src/oauth/identify.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';

/**
 * README "Several identity providers": one gateway, two real authorization
 * servers with different issuers (the default `provider` and
 * `providers.partners`), and two sites, app.localhost (default provider) and
 * partners.localhost (partners). A sign-in for a site is made at that site's
 * provider; one person at both is two users; a session of one provider is
 * no session on a site of the other; back-channel logout is matched to its
 * provider by `iss`; sign-out revokes each session at its own provider.
 */
t.setTimeout(240_000);

let h: Harness;
let app: ScriptedUpstream;
let partners: ScriptedUpstream;
let home: ScriptedUpstream;
let port: string;
let defaultWatch: TokenEndpointWatch;
let partnersWatch: TokenEndpointWatch;

t.before(async () => {
  app = await startScriptedUpstream();
  partners = await startScriptedUpstream();
  home = await startScriptedUpstream();
  h = await startHarness({
    namedProviders: { partners: {} },
    config: {
      routes: [{ path: '/', upstream: home.url }],
      sites: [
        { host: 'app.localhost', routes: [{ path: '/', upstream: app.url }] },
        { host: 'partners.localhost', provider: 'partners', routes: [{ path: '/', upstream: partners.url }] },
      ],
    },
  });
  port = new URL(h.url).port;
  defaultWatch = watchTokenEndpoint(h.as);
  partnersWatch = watchTokenEndpoint(h.named.partners!);
});

t.teardown(async () => {
  await h.close();
  await Promise.all([app.close(), partners.close(), home.close()]);
});

/** A request to the gateway on 127.0.0.1 as a browser on `host` sends it (JSON, so a refusal is 401, not a redirect). */
function get(host: string, path: string, cookie: string): Promise<RawResponse> {
  return httpSend(`http://127.0.0.1:${port}`, { path, headers: { host: `${host}:${port}`, cookie, accept: 'application/json' } });
}

/** Signs `user` in on the sign-in host for `returnTo`; the session cookies the callback set, by name, and where the AS was. */
async function signInFor(returnTo: string, user: string): Promise<{ cookies: Map<string, string>; authorizationUrl: URL; setCookie: string[] }> {
  const jar = new CookieJar();
  const { loginCookies, authorizationUrl } = await startLogin(h.url, { returnTo });
  jar.store(h.url, loginCookies);
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, user);
  const callback = await jar.fetch(callbackUrl);
  await callback.arrayBuffer();
  const setCookie = callback.headers.getSetCookie();
  const cookies = new Map<string, string>();
  for (const name of ['session_id', 'session_id.partners']) {
    const value = jar.get(h.url, name);
    if (value !== undefined && value !== '') cookies.set(name, value);
  }
  return { cookies, authorizationUrl, setCookie };
}

const partnersSite = () => `http://partners.localhost:${port}/reports?q=1`;
const appSite = () => `http://app.localhost:${port}/home`;

t.test("a sign-in goes to the provider of the site in returnTo, and the callback completes it with that provider's client", async (t) => {
  const asOrigin = new URL(h.as.url).origin;
  const partnersOrigin = new URL(h.named.partners!.url).origin;
  t.equal((await startLogin(h.url, { returnTo: partnersSite() })).authorizationUrl.origin, partnersOrigin, 'a partners site URL: the partners provider');
  t.equal((await startLogin(h.url, { returnTo: appSite() })).authorizationUrl.origin, asOrigin, 'a default-provider site URL: the default provider');
  t.equal((await startLogin(h.url, { returnTo: '/x' })).authorizationUrl.origin, asOrigin, 'a path: the default provider');
  for (const garbage of [`http://unknown.localhost:${port}/`, 'https://partners.localhost/', 'http://partners.localhost:1:2/', 'javascript:alert(1)', `http://user@partners.localhost:${port}/`]) {
    t.equal((await startLogin(h.url, { returnTo: garbage })).authorizationUrl.origin, asOrigin, `${garbage}: names no site, the default provider`);
  }

  const before = partnersWatch.codeExchanges;
  const signedIn = await signInFor(partnersSite(), 'carol');
  t.equal(partnersWatch.codeExchanges, before + 1, 'the code was exchanged at the partners provider');
  t.ok(signedIn.cookies.has('session_id.partners'), 'the sign-in host keeps the partners session in its own cookie');
  t.notOk(signedIn.cookies.has('session_id'), 'and leaves the default provider cookie alone');
  const record = await h.gateway.context.store.getTokens(openIdUserKey(h.named.partners!.url, 'carol'));
  t.equal(record?.provider, 'partners', 'the token record remembers its provider');
});

t.test('one person at two providers is two users, each with their own record and session', async (t) => {
  const atDefault = await signInFor('/', 'dana');
  const atPartners = await signInFor(partnersSite(), 'dana');
  const defaultKey = openIdUserKey(h.as.url, 'dana');
  const partnersKey = openIdUserKey(h.named.partners!.url, 'dana');
  t.not(defaultKey, partnersKey);
  const [defaultRecord, partnersRecord] = await Promise.all([h.gateway.context.store.getTokens(defaultKey), h.gateway.context.store.getTokens(partnersKey)]);
  t.ok(defaultRecord, 'the default provider record is kept');
  t.ok(partnersRecord, 'the partners record beside it');
  t.equal(defaultRecord?.provider, undefined, 'a default-provider record is stored as before (no provider name)');
  t.equal(partnersRecord?.provider, 'partners');
  t.not(defaultRecord?.accessToken, partnersRecord?.accessToken);
  t.equal(Object.keys(defaultRecord!.sessions).length, 1, 'the second sign-in did not take over the first user');
  t.equal(Object.keys(partnersRecord!.sessions).length, 1);
  t.ok(atDefault.cookies.get('session_id') && atPartners.cookies.get('session_id.partners'));
});

t.test("a session is accepted only on a site of its own provider", async (t) => {
  const defaultSession = (await signInFor('/', 'erin')).cookies.get('session_id')!;
  const partnersSession = (await signInFor(partnersSite(), 'erin')).cookies.get('session_id.partners')!;
  app.seen.length = 0;
  partners.seen.length = 0;

  // The session ids as each site's own cookie would carry them (the hand-off sets the site's cookie to such an id).
  t.equal((await get('partners.localhost', '/reports', `session_id=${partnersSession}`)).status, 200, 'partners session on the partners site');
  t.equal((await get('app.localhost', '/home', `session_id=${defaultSession}`)).status, 200, 'default session on the default-provider site');
  t.equal(partners.seen.length, 1);
  t.equal(app.seen.length, 1);
  t.match(partners.seen[0]!.headers.authorization, /^Bearer /, 'with the partners access token');

  const foreignOnPartners = await get('partners.localhost', '/reports', `session_id=${defaultSession}`);
  t.equal(foreignOnPartners.status, 401, 'a default-provider session is no session on the partners site');
  const foreignOnApp = await get('app.localhost', '/home', `session_id=${partnersSession}`);
  t.equal(foreignOnApp.status, 401, 'a partners session is no session on a default-provider site');
  const onSignInHost = await httpSend(h.url, { path: '/anything', headers: { cookie: `session_id=${partnersSession}`, accept: 'application/json' } });
  t.equal(onSignInHost.status, 401, 'nor on the sign-in host, whose own routes are the default provider\'s');
  t.equal(home.seen.length, 0, 'nothing reached the sign-in host upstream');
  t.equal(partners.seen.length, 1, 'nothing more reached the partners upstream');
  t.equal(app.seen.length, 1, 'nothing more reached the app upstream');
  t.equal((await get('partners.localhost', '/reports', `session_id=${partnersSession}`)).status, 200, 'the refused use ended nothing');
});

t.test('back-channel logout: one endpoint, the token matched to its provider by iss and verified with its keys', async (t) => {
  const defaultSession = (await signInFor('/', 'fay')).cookies.get('session_id')!;
  const partnersSession = (await signInFor(partnersSite(), 'fay')).cookies.get('session_id.partners')!;
  const alive = async () => [
    (await get('app.localhost', '/home', `session_id=${defaultSession}`)).status,
    (await get('partners.localhost', '/reports', `session_id=${partnersSession}`)).status,
  ];
  t.strictSame(await alive(), [200, 200]);

  // A token of a provider the gateway does not know: 400, nothing ended.
  const stranger = await startAuthorizationServer({ clients: [{ clientId: CLIENT_ID, clientSecret: 'x', redirectUris: [`${h.url}/callback`] }] });
  t.teardown(() => stranger.close());
  const unknown = await postLogoutToken(h.url, await signedByAs(stranger, CLIENT_ID, { sub: 'fay' }));
  t.equal(unknown.status, 400, 'a logout token from an unknown issuer is refused');
  // Partners' iss, a signature by a key partners never published.
  const forged = await postLogoutToken(h.url, resignedWithForeignKey(await signedByAs(h.named.partners!, CLIENT_ID, { sub: 'fay' })));
  t.equal(forged.status, 400, "a token claiming partners' iss must verify with partners' keys");
  t.strictSame(await alive(), [200, 200], 'neither ended anything');

  const fromPartners = await postLogoutToken(h.url, await signedByAs(h.named.partners!, CLIENT_ID, { sub: 'fay' }));
  t.equal(fromPartners.status, 200);
  t.strictSame(await alive(), [200, 401], "partners' token ends fay's partners session only, never her session at the default provider");

  const fromDefault = await postLogoutToken(h.url, await signedByAs(h.as, CLIENT_ID, { sub: 'fay' }));
  t.equal(fromDefault.status, 200);
  t.strictSame(await alive(), [401, 401], "the default provider's token ends the other");
});

t.test('sign-out on the sign-in host ends the session of every provider, each revoked at its own provider', async (t) => {
  const jar = new CookieJar();
  for (const returnTo of ['/', partnersSite()]) {
    const { loginCookies, authorizationUrl } = await startLogin(h.url, { returnTo });
    jar.store(h.url, loginCookies);
    const callback = await jar.fetch(await approveAtAuthorizationServer(authorizationUrl, 'gus'));
    await callback.arrayBuffer();
  }
  const defaultSession = jar.get(h.url, 'session_id')!;
  const partnersSession = jar.get(h.url, 'session_id.partners')!;
  const defaultRefresh = defaultWatch.issued.at(-1)!.refreshToken!;
  const partnersRefresh = partnersWatch.issued.at(-1)!.refreshToken!;
  t.equal((await introspect(h.as, defaultRefresh, 'refresh_token')).active, true);
  t.equal((await introspect(h.named.partners!, partnersRefresh, 'refresh_token')).active, true);

  const logout = await jar.fetch(`${h.url}/logout`);
  await logout.arrayBuffer();
  t.equal(logout.status, 302);
  for (const name of ['session_id', 'session_id.partners']) {
    const cleared = findSetCookie(logout, name);
    t.ok(cleared && isDeletion(cleared), `${name} is cleared`);
  }
  t.equal((await introspect(h.as, defaultRefresh, 'refresh_token')).active, false, 'the default refresh token is revoked at the default provider');
  t.equal((await introspect(h.named.partners!, partnersRefresh, 'refresh_token')).active, false, 'the partners refresh token at partners');
  t.equal((await get('app.localhost', '/home', `session_id=${defaultSession}`)).status, 401);
  t.equal((await get('partners.localhost', '/reports', `session_id=${partnersSession}`)).status, 401);
});

t.test('a refresh goes to the provider of the record', async (t) => {
  const partnersSession = (await signInFor(partnersSite(), 'hal')).cookies.get('session_id.partners')!;
  const key = openIdUserKey(h.named.partners!.url, 'hal');
  const { store } = h.gateway.context;
  const record = (await store.getTokens(key))!;
  // The access token is made stale in the store, as time passing would: the next request refreshes it.
  await store.saveTokens({ ...record, expiresAt: Date.now() - 1000 });
  const [defaultBefore, partnersBefore] = [defaultWatch.issued.length, partnersWatch.issued.length];
  t.equal((await get('partners.localhost', '/reports', `session_id=${partnersSession}`)).status, 200);
  t.equal(partnersWatch.issued.length, partnersBefore + 1, 'refreshed at partners');
  t.equal(partnersWatch.issued.at(-1)!.grantType, 'refresh_token');
  t.equal(defaultWatch.issued.length, defaultBefore, 'not at the default provider');
  t.not((await store.getTokens(key))!.accessToken, record.accessToken);
});

/** GET through the gateway as a browser on the URL's host, with `cookie`; the answer's status, Location and session cookie value. */
async function visit(url: string, cookie = ''): Promise<{ status: number; location: string; session: string | undefined }> {
  const target = new URL(url);
  const answer = await httpSend(`http://127.0.0.1:${port}`, { path: `${target.pathname}${target.search}`, headers: { host: target.host, ...(cookie === '' ? {} : { cookie }) } });
  const set = answer.headers['set-cookie'] ?? [];
  const session = set.find((line) => line.startsWith('session_id='))?.split(';')[0]!.slice('session_id='.length);
  return { status: answer.status, location: String(answer.headers.location ?? ''), session: session === '' ? undefined : session };
}

t.test("the hand-off gives the partners site a partners session; signed in there already, the sign-in host hands off at once only for that site's provider", async (t) => {
  const { cookies } = await signInFor(partnersSite(), 'ivy');
  // The callback sent the browser to the partners site's hand-off; a later /login for that site hands off at once.
  const jarCookie = `session_id.partners=${cookies.get('session_id.partners')}`;
  const login = await visit(`${h.url}/login?returnTo=${encodeURIComponent(partnersSite())}`, jarCookie);
  t.equal(login.status, 302);
  const handoff = new URL(login.location);
  t.equal(handoff.host, `partners.localhost:${port}`, 'signed in with partners already: straight to the hand-off');
  t.equal(handoff.pathname, '/.gatehouse/handoff');
  const used = await visit(handoff.href);
  t.equal(used.status, 302);
  t.equal(used.location, '/reports?q=1');
  t.ok(used.session, 'the site gets its own session cookie');
  t.equal((await get('partners.localhost', '/reports', `session_id=${used.session}`)).status, 200, 'a partners session on the partners site');
  t.equal((await get('app.localhost', '/home', `session_id=${used.session}`)).status, 401, 'and no session on a default-provider site');

  // With only a default-provider session on the sign-in host, a sign-in for the partners site goes to partners.
  const defaultOnly = (await signInFor('/', 'ivy')).cookies.get('session_id')!;
  const fresh = await visit(`${h.url}/login?returnTo=${encodeURIComponent(partnersSite())}`, `session_id=${defaultOnly}`);
  t.equal(new URL(fresh.location).origin, new URL(h.named.partners!.url).origin, "a default-provider session is not handed to the partners site: sign-in at partners");
  const toApp = await visit(`${h.url}/login?returnTo=${encodeURIComponent(appSite())}`, `session_id=${defaultOnly}`);
  t.equal(new URL(toApp.location).host, `app.localhost:${port}`, 'while the default-provider site gets its hand-off at once');
});

t.test("no provider's session cookie reaches an upstream, and an upstream cannot set one", async (t) => {
  const jar = new CookieJar();
  for (const returnTo of ['/', partnersSite()]) {
    const { loginCookies, authorizationUrl } = await startLogin(h.url, { returnTo });
    jar.store(h.url, loginCookies);
    await (await jar.fetch(await approveAtAuthorizationServer(authorizationUrl, 'jo'))).arrayBuffer();
  }
  const both = `session_id=${jar.get(h.url, 'session_id')}; session_id.partners=${jar.get(h.url, 'session_id.partners')}; theme=dark`;
  home.seen.length = 0;
  home.answer = (_req, res) => {
    res.setHeader('set-cookie', ['session_id.partners=planted; Path=/', 'pref=1; Path=/']);
    res.end('ok');
  };
  const answer = await httpSend(h.url, { path: '/page', headers: { cookie: both } });
  t.equal(answer.status, 200);
  t.equal(home.seen[0]?.headers.cookie, 'theme=dark', "the upstream gets the browser's own cookies only");
  t.strictSame(answer.headers['set-cookie'], ['pref=1; Path=/'], "the upstream's attempt to set a provider session cookie is dropped");
});
