import t from 'tap';
import { CLIENT_ID, startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { introspect, watchTokenEndpoint, type TokenEndpointWatch } from '../helpers/authorization-server-watch.js';

/**
 * Destroys one access token at the AS, leaving its grant and refresh token
 * alive (oidc-provider's revocation endpoint would revoke the whole grant).
 */
async function revokeAtAs(h: Harness, accessToken: string): Promise<void> {
  const token = await h.as.provider.AccessToken.find(accessToken);
  if (!token) throw new Error('the AS does not know the access token');
  await token.destroy();
}

function currentAccessToken(watch: TokenEndpointWatch): string {
  return watch.issued.at(-1)!.accessToken!;
}

/**
 * The upstream answers 401 to a token the gateway believed fresh (here:
 * revoked at the AS long before it expires). A bodiless GET, HEAD or
 * OPTIONS is retried once after one refresh; any other method gets the
 * upstream's 401 as it is; a retried request that is refused again is
 * passed through, never retried in a loop.
 */
t.test('an access token revoked at the AS', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  t.test('GET: one refresh, one retry, and the browser sees only the 200', async (t) => {
    const revoked = currentAccessToken(watch);
    await revokeAtAs(h, revoked);
    t.equal((await introspect(h.as, revoked, 'access_token')).active, false, 'the AS no longer accepts the token');
    const refreshesBefore = h.as.grants.refreshToken;
    const upstreamBefore = h.upstream.received.length;

    const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(me.status, 200);
    t.match(await me.json(), { sub: 'alice' });
    t.equal(h.as.grants.refreshToken - refreshesBefore, 1, 'exactly one refresh');
    const seen = h.upstream.received.slice(upstreamBefore);
    t.strictSame(
      seen.map((request) => [request.method, request.url, request.active]),
      [
        ['GET', '/api/me', false],
        ['GET', '/api/me', true],
      ],
      'the upstream saw the refused request, then the retry with the new token',
    );
    t.not(seen[1]!.headers.authorization, `Bearer ${revoked}`);
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'the next request uses the new token directly');
    t.equal(h.as.grants.refreshToken - refreshesBefore, 1, 'and needs no refresh');
  });

  t.test('HEAD is retried too', async (t) => {
    await revokeAtAs(h, currentAccessToken(watch));
    const refreshesBefore = h.as.grants.refreshToken;
    const upstreamBefore = h.upstream.received.length;
    const head = await fetch(`${h.url}/api/me`, { method: 'HEAD', headers: { cookie } });
    t.not(head.status, 401, 'the browser does not see the 401');
    t.equal(h.as.grants.refreshToken - refreshesBefore, 1);
    t.strictSame(
      h.upstream.received.slice(upstreamBefore).map((request) => [request.method, request.active]),
      [
        ['HEAD', false],
        ['HEAD', true],
      ],
    );
  });

  t.test("POST: the upstream's 401 is passed through, nothing is refreshed or sent twice", async (t) => {
    await revokeAtAs(h, currentAccessToken(watch));
    const refreshesBefore = h.as.grants.refreshToken;
    const upstreamBefore = h.upstream.received.length;
    const post = await fetch(`${h.url}/api/echo`, {
      method: 'POST',
      headers: { cookie, origin: h.url, 'content-type': 'application/json' },
      body: JSON.stringify({ order: 1 }),
    });
    t.equal(post.status, 401);
    t.strictSame(await post.json(), { error: 'invalid_token' }, "the upstream's own body");
    t.equal(post.headers.get('www-authenticate'), 'Bearer error="invalid_token"', "and the upstream's challenge");
    t.equal(post.headers.getSetCookie().length, 0, 'the session cookie is not cleared: the session is still good');
    t.equal(h.upstream.received.length - upstreamBefore, 1, 'sent once');
    t.equal(h.as.grants.refreshToken, refreshesBefore, 'no refresh');

    const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(me.status, 200, 'a later GET recovers with one refresh');
    t.equal(h.as.grants.refreshToken - refreshesBefore, 1);
  });

  t.test('the refresh token is revoked too: a clean 401, session ended', async (t) => {
    const issued = watch.issued.at(-1)!;
    // RFC 7009 at the AS's revocation endpoint, with the gateway's client credentials.
    const response = await fetch(`${h.as.listenUrl}/token/revocation`, {
      method: 'POST',
      body: new URLSearchParams({ token: issued.refreshToken!, token_type_hint: 'refresh_token', client_id: CLIENT_ID, client_secret: h.clientSecret }),
    });
    t.equal(response.status, 200);
    t.equal((await introspect(h.as, issued.accessToken!, 'access_token')).active, false, 'revoking the grant took the access token with it');
    const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(me.status, 401);
    t.strictSame(await me.json(), { error: 'unauthorized' }, "the gateway's 401: the refresh was rejected");
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401, 'the session has ended');
  });
});

t.test('an upstream that answers 401 to every token: one retry, then never again for that token', async (t) => {
  const upstream = await startScriptedUpstream();
  upstream.answer = (_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"', 'content-type': 'application/json' });
    res.end('{"error":"always"}');
  };
  const h = await startHarness({ config: { upstream: upstream.url } });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'alice' });

  const first = await fetch(`${h.url}/anything`, { headers: { cookie } });
  t.equal(first.status, 401);
  t.strictSame(await first.json(), { error: 'always' }, "the retried request's 401 is passed through");
  t.equal(upstream.seen.length, 2, 'the request was sent twice: once, and once retried');
  t.equal(h.as.grants.refreshToken, 1, 'after one refresh');
  t.not(upstream.seen[0]!.headers.authorization, upstream.seen[1]!.headers.authorization, 'the retry carried the new token');

  const second = await fetch(`${h.url}/anything`, { headers: { cookie } });
  t.equal(second.status, 401);
  await second.arrayBuffer();
  t.equal(upstream.seen.length, 3, 'a token refused right after its replacement is not retried again');
  t.equal(h.as.grants.refreshToken, 1, 'no second refresh');
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200, 'the session is kept');
});
