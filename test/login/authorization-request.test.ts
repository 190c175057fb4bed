import t from 'tap';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';

/**
 * README "What the browser sees", GET /login: 302 to the AS authorization endpoint with
 * response_type=code, client_id, redirect_uri, scope, state, PKCE S256 and a
 * nonce for openid; the pending login is bound to the browser by an
 * HttpOnly, SameSite=Lax login cookie of at most 600 s.
 */
t.test('GET /login', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const discovery = (await (await fetch(`${h.as.url}/.well-known/openid-configuration`)).json()) as { authorization_endpoint: string };

  t.test('redirects to the authorization endpoint with every required parameter, once each', async (t) => {
    const response = await fetch(`${h.url}/login?returnTo=/orders`, { redirect: 'manual' });
    t.equal(response.status, 302);
    t.equal(response.headers.get('cache-control'), 'no-store');
    const location = new URL(response.headers.get('location')!);
    t.equal(`${location.origin}${location.pathname}`, discovery.authorization_endpoint);
    const expected: Record<string, string | RegExp> = {
      response_type: 'code',
      client_id: CLIENT_ID,
      redirect_uri: `${h.url}/callback`,
      scope: 'openid profile email offline_access',
      state: /^[A-Za-z0-9_-]{43}$/,
      code_challenge: /^[A-Za-z0-9_-]{43}$/,
      code_challenge_method: 'S256',
      nonce: /^[A-Za-z0-9_-]{43}$/,
    };
    for (const [name, value] of Object.entries(expected)) {
      const all = location.searchParams.getAll(name);
      t.equal(all.length, 1, `${name} given once`);
      if (typeof value === 'string') t.equal(all[0], value, name);
      else t.match(all[0], value, name);
    }
    t.notOk(location.searchParams.has('client_secret'), 'no client secret in the URL');
    t.notOk(location.searchParams.has('code_verifier'), 'no PKCE verifier in the URL');
    t.not(location.searchParams.get('state'), location.searchParams.get('nonce'), 'state and nonce are distinct values');
  });

  t.test('each login gets a fresh state, PKCE challenge and nonce', async (t) => {
    const seen = { state: new Set<string>(), code_challenge: new Set<string>(), nonce: new Set<string>() };
    for (let i = 0; i < 5; i += 1) {
      const location = new URL((await fetch(`${h.url}/login`, { redirect: 'manual' })).headers.get('location')!);
      for (const name of ['state', 'code_challenge', 'nonce'] as const) seen[name].add(location.searchParams.get(name)!);
    }
    for (const [name, values] of Object.entries(seen)) t.equal(values.size, 5, `${name} never repeats`);
  });

  t.test('sets an HttpOnly, SameSite=Lax login cookie of at most 600 s on Path=/, sealed, and no session cookie', async (t) => {
    const response = await fetch(`${h.url}/login?returnTo=/private/reports`, { redirect: 'manual' });
    const location = new URL(response.headers.get('location')!);
    const cookie = findSetCookie(response, 'session_id_login');
    t.ok(cookie, 'a login cookie is set');
    const { attributes, value } = cookie!;
    t.ok(attributes.has('httponly'), 'HttpOnly');
    t.equal(attributes.get('samesite')?.toLowerCase(), 'lax', 'SameSite=Lax');
    t.equal(attributes.get('path'), '/', 'Path=/');
    const maxAge = Number(attributes.get('max-age'));
    t.ok(maxAge > 0 && maxAge <= 600, `Max-Age ${maxAge} within (0, 600]`);
    t.notOk(attributes.has('secure'), 'not Secure: publicUrl is http and cookieSecure is auto');
    t.notOk(attributes.has('domain'), 'host-only');
    t.equal(findSetCookie(response, 'session_id'), undefined, 'no session cookie before the callback');

    const decoded = Buffer.from(value.replace(/^v1\./, ''), 'base64url').toString('latin1');
    for (const name of ['state', 'code_challenge', 'nonce']) {
      const secret = location.searchParams.get(name)!;
      t.notOk(value.includes(secret) || decoded.includes(secret), `the ${name} is not in the cookie in clear`);
    }
    t.notOk(value.includes('reports') || decoded.includes('reports'), 'the returnTo is not in the cookie in clear');
  });

  t.test('two tabs of one browser can each complete their sign-in, in either order', async (t) => {
    const jar = new CookieJar();
    const tabA = await jar.fetch(`${h.url}/login?returnTo=/tab-a`);
    const tabB = await jar.fetch(`${h.url}/login?returnTo=/tab-b`);
    const callbackA = await approveAtAuthorizationServer(new URL(tabA.headers.get('location')!), 'alice');
    const callbackB = await approveAtAuthorizationServer(new URL(tabB.headers.get('location')!), 'alice');

    const doneB = await jar.fetch(callbackB);
    t.equal(doneB.status, 302);
    t.equal(doneB.headers.get('location'), '/tab-b');
    const sessionB = findSetCookie(doneB, 'session_id')?.value;
    t.ok(sessionB, 'tab B signed in');
    const loginAfterB = findSetCookie(doneB, 'session_id_login');
    t.ok(loginAfterB && !isDeletion(loginAfterB), "the login cookie is rewritten, keeping tab A's pending login");

    const doneA = await jar.fetch(callbackA);
    t.equal(doneA.status, 302);
    t.equal(doneA.headers.get('location'), '/tab-a');
    const sessionA = findSetCookie(doneA, 'session_id')?.value;
    t.ok(sessionA, 'tab A signed in');
    t.not(sessionA, sessionB, 'each sign-in gets its own session id');
    const loginAfterA = findSetCookie(doneA, 'session_id_login');
    t.ok(loginAfterA && isDeletion(loginAfterA), 'the login cookie is deleted once no sign-in is pending');

    for (const id of [sessionA, sessionB]) {
      t.equal((await fetch(`${h.url}/session`, { headers: { cookie: `session_id=${id}` } })).status, 200, 'both sessions work');
    }
  });
});
