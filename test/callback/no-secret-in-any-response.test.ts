import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';
import { navigate } from '../helpers/navigate.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * SECURITY.md: no response to the browser, header or body, contains an access or
 * refresh token, the client secret or the PKCE verifier; the ID token leaves
 * the gateway only as id_token_hint in the logout redirect. Every response of
 * /login, /callback (success and failures), /session and /logout is kept
 * whole and searched for every secret the AS saw.
 */
t.test('no secret in any response of /login, /callback, /session, /logout', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const responses: Array<{ name: string; text: string }> = [];
  const keep = async (name: string, response: Response) => {
    const headers = [...response.headers].filter(([key]) => key !== 'set-cookie').map(([key, value]) => `${key}: ${value}`);
    const cookies = response.headers.getSetCookie().map((value) => `set-cookie: ${value}`);
    responses.push({ name, text: [String(response.status), ...headers, ...cookies, '', await response.text()].join('\n') });
    return response;
  };
  const keepPage = async (name: string, url: string | URL, headers: Record<string, string> = {}) => {
    const page = await navigate(url, headers);
    const head = Object.entries(page.headers).flatMap(([key, value]) => [value ?? []].flat().map((one) => `${key}: ${one}`));
    responses.push({ name, text: [String(page.status), ...head, '', page.body].join('\n') });
  };

  const jar = new CookieJar();
  const login = await keep('login', await jar.fetch(`${h.url}/login?returnTo=/home`));
  const authorizationUrl = new URL(login.headers.get('location')!);
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'alice');
  const loginCookie = jar.header(h.url)!;
  await keep('callback', await jar.fetch(callbackUrl));
  const cookie = `session_id=${jar.get(h.url, 'session_id')}`;
  await keep('session', await fetch(`${h.url}/session`, { headers: { cookie } }));
  await keep('callback replayed (JSON)', await fetch(callbackUrl, { headers: { cookie: loginCookie, accept: 'application/json' }, redirect: 'manual' }));
  await keepPage('callback replayed (page)', callbackUrl, { cookie: loginCookie });

  // A second login whose code is refused by the AS, and one the user cancels.
  const jar2 = new CookieJar();
  const login2 = await keep('login 2', await jar2.fetch(`${h.url}/login`));
  const callback2 = new URL(await approveAtAuthorizationServer(new URL(login2.headers.get('location')!), 'alice'));
  callback2.searchParams.set('code', 'refused-code');
  await keepPage('callback with a refused code', callback2, { cookie: jar2.header(h.url)! });
  await keepPage('callback with an error', `${h.url}/callback?error=access_denied&state=x`);

  const logout = await keep('logout', await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' }));
  await keep('session after logout', await fetch(`${h.url}/session`, { headers: { cookie } }));

  const issued = watch.issued.filter((entry) => entry.grantType === 'authorization_code');
  t.equal(issued.length, 1, 'one code exchange succeeded');
  const { accessToken, refreshToken, idToken, code, codeVerifier } = issued[0]!;
  const secrets: Record<string, string | undefined> = { clientSecret: h.clientSecret, accessToken, refreshToken, codeVerifier, code };
  for (const [name, value] of Object.entries(secrets)) {
    t.ok(value && value.length >= 16, `${name} captured`);
    const found = responses.filter((response) => response.text.includes(value!) || response.text.includes(encodeURIComponent(value!)));
    t.same(found.map((response) => response.name), [], `the ${name} is in no response`);
  }

  t.ok(idToken, 'an ID token was issued');
  const hint = new URL(logout.headers.get('location')!).searchParams.get('id_token_hint');
  t.equal(hint, idToken, 'the ID token is the id_token_hint of the logout redirect');
  const withIdToken = responses.filter((response) => response.text.includes(idToken!) || response.text.includes(encodeURIComponent(idToken!)));
  t.same(withIdToken.map((response) => response.name), ['logout'], 'and appears in no other response');
  const logoutText = responses.find((response) => response.name === 'logout')!.text;
  t.equal(logoutText.split(idToken!).length - 1, 1, 'once in the logout response: its Location');
  t.ok(responses.every((response) => !/eyJ[\w-]*\.[\w-]*\./.test(response.text) || response.name === 'logout'), 'nothing else JWT-shaped');

  const sealed = loginCookie.slice(loginCookie.indexOf('=') + 1);
  const sealedBytes = Buffer.from(sealed.replace(/^v1\./, ''), 'base64url').toString('latin1');
  for (const [name, value] of [
    ['state', authorizationUrl.searchParams.get('state')!],
    ['code_challenge', authorizationUrl.searchParams.get('code_challenge')!],
    ['nonce', authorizationUrl.searchParams.get('nonce')!],
    ['PKCE verifier', codeVerifier!],
  ] as const) {
    t.notOk(sealed.includes(value) || sealedBytes.includes(value), `the login cookie hides the ${name}`);
  }
});
