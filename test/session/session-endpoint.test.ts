import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "What the browser sees", GET /session: 200 JSON {user: <ID token / userinfo claims>,
 * expiresAt: <session expiry, ISO 8601>} or 401; never a token. The session
 * ttl (2 h here) is absolute from login and differs from the cookie's
 * Max-Age (24 h default), so expiresAt must come from session.ttl.
 */
const TTL_MS = 2 * 60 * 60 * 1000;

/** Every key of a JSON value, at any depth. */
function keysOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keysOf);
  if (typeof value === 'object' && value !== null) return Object.entries(value).flatMap(([key, inner]) => [key, ...keysOf(inner)]);
  return [];
}

t.test('GET /session', async (t) => {
  const h = await startHarness({ config: { session: { ttl: '2h' } } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);

  t.test('with a session: who is signed in and until when, uncacheable', async (t) => {
    const before = Date.now();
    const { cookie } = await signIn(h.url, { user: 'carol' });
    const after = Date.now();
    const response = await fetch(`${h.url}/session`, { headers: { cookie } });
    t.equal(response.status, 200);
    t.match(response.headers.get('content-type'), /^application\/json/);
    t.equal(response.headers.get('cache-control'), 'no-store');
    const text = await response.text();
    const body = JSON.parse(text) as { user: Record<string, unknown>; expiresAt: string; acr: unknown; auth_time: unknown };
    t.same(Object.keys(body).sort(), ['acr', 'auth_time', 'expiresAt', 'user']);
    // README "Step-up": how the user signed in, so a page can tell whether a route's step-up is met.
    // This AS puts acr and auth_time in the ID token only when asked (test/step-up/step-up-sign-in.test.ts shows them set).
    t.equal(body.acr, null, 'no acr: null, not absent');
    t.equal(body.auth_time, null, 'no auth_time: null, not absent');
    t.match(body.user, { sub: 'carol', name: 'Carol', email: 'carol@example.com', email_verified: true });
    t.notOk('nonce' in body.user || 'at_hash' in body.user, 'no token-bound claims');
    for (const claim of ['c_hash', 'auth_time', 'iat', 'exp', 'aud', 'azp', 'sid', 'jti', 'nbf']) t.notOk(claim in body.user, `no protocol claim ${claim}`);
    t.strictSame(Object.keys(body.user).sort(), ['email', 'email_verified', 'iss', 'name', 'sub'], "only the user's claims, and the issuer that scopes sub");

    t.match(body.expiresAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, 'ISO 8601');
    const expiresAt = Date.parse(body.expiresAt);
    t.ok(expiresAt >= before + TTL_MS - 1000 && expiresAt <= after + TTL_MS + 1000, `login time + 2 h (${body.expiresAt})`);

    t.notOk(keysOf(body).some((key) => /token/i.test(key)), 'no key names a token');
    t.notMatch(text, /eyJ[\w-]*\.[\w-]*\./, 'nothing JWT-shaped');
    const issued = watch.issued.at(-1)!;
    for (const [kind, token] of Object.entries(issued)) {
      if (kind !== 'grantType' && token) t.notOk(text.includes(token), `the ${kind} is absent`);
    }
    t.ok(issued.accessToken && issued.refreshToken && issued.idToken, 'three tokens were issued and checked');

    const again = (await (await fetch(`${h.url}/session`, { headers: { cookie } })).json()) as { expiresAt: string };
    t.equal(again.expiresAt, body.expiresAt, 'absolute from login: asking again does not extend it');
  });

  t.test('without a session: 401', async (t) => {
    const none = await fetch(`${h.url}/session`);
    t.equal(none.status, 401);
    t.same(await none.json(), { error: 'unauthorized' });
    t.equal(none.headers.get('cache-control'), 'no-store');

    const unknown = await fetch(`${h.url}/session`, { headers: { cookie: `session_id=${'A'.repeat(43)}` } });
    t.equal(unknown.status, 401);
    t.same(await unknown.json(), { error: 'unauthorized' });
    const cleared = findSetCookie(unknown, 'session_id');
    t.ok(cleared && isDeletion(cleared), 'a stale cookie is cleared');

    const { cookie } = await signIn(h.url, { user: 'dave' });
    await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' });
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401, 'after logout');
  });
});
