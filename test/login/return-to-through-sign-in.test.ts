import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { approveAtAuthorizationServer } from '../helpers/sign-in.js';

/**
 * README "What the browser sees": after sign-in the callback sends the browser to returnTo, which
 * must be a local path (one leading `/`, no `//`, `/\`, backslash or control
 * character, raw or percent-encoded); anything else becomes `/`. Driven
 * through the real /login, AS and /callback, with the query strings a
 * browser or an attacker's link would carry.
 */
const CASES: Array<[string, string, string]> = [
  ['a path with a query is kept', `returnTo=${encodeURIComponent('/orders?id=7&sort=desc')}`, '/orders?id=7&sort=desc'],
  ['no returnTo means /', '', '/'],
  ['an absolute URL becomes /', 'returnTo=https%3A%2F%2Fevil.example%2F', '/'],
  ['a scheme-relative URL becomes /', 'returnTo=//evil.example', '/'],
  ['slash backslash becomes /', 'returnTo=/%5Cevil.example', '/'],
  ['an encoded second slash becomes /', 'returnTo=/%252F/evil.example', '/'],
  ['an encoded CR LF becomes /', 'returnTo=/a%250d%250aSet-Cookie:%2520x=y', '/'],
  ['a raw tab becomes /', 'returnTo=/a%09b', '/'],
  ['javascript: becomes /', 'returnTo=javascript:alert(1)', '/'],
  ['a repeated returnTo becomes /', 'returnTo=/a&returnTo=/b', '/'],
  ['unicode is kept, percent-encoded', `returnTo=${encodeURIComponent('/café')}`, '/caf%C3%A9'],
];

t.test('returnTo through /login, the AS and /callback', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());

  const signInWith = async (query: string) => {
    const jar = new CookieJar();
    const login = await jar.fetch(`${h.url}/login${query === '' ? '' : `?${query}`}`);
    if (login.status !== 302) return { login: login.status, location: null };
    const callback = await jar.fetch(await approveAtAuthorizationServer(new URL(login.headers.get('location')!), 'alice'));
    return { login: login.status, callback: callback.status, location: callback.headers.get('location') };
  };

  for (const [name, query, expected] of CASES) {
    t.match(await signInWith(query), { login: 302, callback: 302, location: expected }, name);
  }
});
