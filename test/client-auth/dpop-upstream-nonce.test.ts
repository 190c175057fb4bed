import t, { type Test } from 'tap';
import { EmbeddedJWK, jwtVerify, type JWTPayload } from 'jose';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchClientRequests } from '../helpers/client-requests.js';
import { startDpopUpstream, type DpopUpstream } from '../helpers/dpop-upstream.js';
import { storedTokens } from '../helpers/refresh.js';

/**
 * README "Client authentication and sender-constrained tokens", DPoP: an
 * upstream resource server that hands out its own nonces (RFC 9449 §9).
 * A `use_dpop_nonce` 401 is answered by sending the request once more with
 * a proof carrying the nonce, never by a refresh grant; the nonce is kept
 * per upstream origin, so the next requests (of any user) pass first time;
 * a second nonce 401 goes to the client as it is. The AS is oidc-provider
 * (tokens bound to the key), the upstream checks every proof and
 * introspects the token.
 */

async function nonceHarness(t: Test): Promise<{ h: Harness; upstream: DpopUpstream }> {
  const upstream = await startDpopUpstream();
  const h = await startHarness({
    dpopBound: true,
    config: (as) => {
      upstream.introspection = { endpoint: `${as.listenUrl}/token/introspection`, ...as.introspection };
      return { upstream: upstream.url, provider: { dpop: true } };
    },
  });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  return { h, upstream };
}

/** The proof's payload, its signature verified by jose with the key in its own header, typ dpop+jwt. */
async function verifiedProof(proof: string | undefined): Promise<JWTPayload> {
  const { payload, protectedHeader } = await jwtVerify(proof!, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: ['ES256'] });
  if (protectedHeader.jwk === undefined || 'd' in protectedHeader.jwk) throw new Error('proof header without a public jwk');
  return payload;
}

t.test("an upstream's use_dpop_nonce: one retry with the nonce, no refresh, the nonce kept for the origin", async (t) => {
  const { h, upstream } = await nonceHarness(t);
  const seen = watchClientRequests(h.asProxy);
  const refreshGrants = () => seen.filter((r) => r.path === '/token' && r.params.grant_type === 'refresh_token').length;
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const record = await storedTokens(h, 'alice');
  upstream.nonce = 'n-1_first~nonce';

  let before = upstream.checks.length;
  const first = await fetch(`${h.url}/api/me?q=1`, { headers: { cookie } });
  t.equal(first.status, 200, 'the request succeeds');
  t.match(await first.json(), { sub: 'alice' });
  const attempts = upstream.checks.slice(before);
  t.same(
    attempts.map((c) => c.verdict),
    ['use_dpop_nonce', 'ok'],
    'two upstream attempts: refused for want of a nonce, then accepted',
  );
  const [refusedProof, acceptedProof] = await Promise.all(attempts.map((c) => verifiedProof(c.proof)));
  t.equal(refusedProof!.nonce, undefined, 'the first proof had no nonce');
  t.match(acceptedProof, { nonce: 'n-1_first~nonce', htm: 'GET', htu: `${upstream.url}/api/me` }, 'the retry carries the nonce, for the same method and URL');
  t.not(acceptedProof!.jti, refusedProof!.jti, 'in a new proof (its own jti)');
  t.equal(attempts[1]!.authorization, attempts[0]!.authorization, 'with the same access token');
  t.equal(refreshGrants(), 0, 'no refresh grant at the AS');
  t.equal((await storedTokens(h, 'alice'))?.accessToken, record?.accessToken, 'the token record is unchanged');

  before = upstream.checks.length;
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.same(upstream.checks.slice(before).map((c) => c.verdict), ['ok'], 'the next request passes first time: one attempt');
  t.equal((await verifiedProof(upstream.checks.at(-1)!.proof)).nonce, 'n-1_first~nonce', 'with the cached nonce');

  // The nonce belongs to the upstream's origin, not to one user's key.
  const bob = await signIn(h.url, { user: 'bob' });
  before = upstream.checks.length;
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 200);
  t.same(upstream.checks.slice(before).map((c) => c.verdict), ['ok'], "another user's first request carries it too");
  t.match(upstream.checks.at(-1)!.sub, 'bob');

  // The server moves on to another nonce: once more one retry, still no refresh.
  upstream.nonce = 'n2';
  before = upstream.checks.length;
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.same(upstream.checks.slice(before).map((c) => c.verdict), ['use_dpop_nonce', 'ok'], 'a rotated nonce: refused, then accepted');
  t.equal((await verifiedProof(upstream.checks.at(-1)!.proof)).nonce, 'n2');
  t.equal(refreshGrants(), 0, 'still no refresh grant');
  t.ok(h.logs.some((line) => line.msg === 'upstream asked for a DPoP nonce: sending the request once more with it'), 'the retry is logged');
});

t.test('a request with a body is not sent twice: the 401 goes to the client, and the next request carries the nonce', async (t) => {
  const { h, upstream } = await nonceHarness(t);
  const seen = watchClientRequests(h.asProxy);
  const { cookie } = await signIn(h.url, { user: 'carol' });
  upstream.nonce = 'body-nonce';

  let before = upstream.checks.length;
  const post = await fetch(`${h.url}/api/items`, { method: 'POST', headers: { cookie, origin: h.url, 'content-type': 'application/json' }, body: '{"a":1}' });
  t.equal(post.status, 401, "the upstream's 401 as it is");
  t.match(post.headers.get('www-authenticate'), /use_dpop_nonce/);
  t.equal(post.headers.get('dpop-nonce'), 'body-nonce', 'with its DPoP-Nonce');
  t.equal(upstream.checks.length - before, 1, 'one upstream attempt');

  before = upstream.checks.length;
  const again = await fetch(`${h.url}/api/items`, { method: 'POST', headers: { cookie, origin: h.url, 'content-type': 'application/json' }, body: '{"a":1}' });
  t.equal(again.status, 200, 'the next POST passes');
  t.same(upstream.checks.slice(before).map((c) => c.verdict), ['ok'], 'first time');
  t.match(await verifiedProof(upstream.checks.at(-1)!.proof), { nonce: 'body-nonce', htm: 'POST' });
  t.equal(seen.filter((r) => r.path === '/token' && r.params.grant_type === 'refresh_token').length, 0, 'no refresh grant');
});

t.test('a second use_dpop_nonce is passed to the client as it is: no loop, no refresh', async (t) => {
  const { h, upstream } = await nonceHarness(t);
  const seen = watchClientRequests(h.asProxy);
  const { cookie } = await signIn(h.url, { user: 'dave' });
  upstream.nonce = 'never-enough';
  upstream.refuseEveryNonce = true;

  const before = upstream.checks.length;
  const refused = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(refused.status, 401, 'the second 401 reaches the client');
  t.match(refused.headers.get('www-authenticate'), /^DPoP error="use_dpop_nonce"/);
  t.ok(refused.headers.get('dpop-nonce'), 'with the upstream DPoP-Nonce');
  t.match(await refused.json(), { error: 'use_dpop_nonce' }, "and the upstream's body");
  const attempts = upstream.checks.slice(before);
  t.equal(attempts.length, 2, 'two upstream attempts, not more');
  t.ok((await verifiedProof(attempts[1]!.proof)).nonce, 'the second with the nonce the first refusal gave');
  t.equal(seen.filter((r) => r.path === '/token' && r.params.grant_type === 'refresh_token').length, 0, 'no refresh grant');
});

t.test('a malformed nonce is not used; the nonces kept are bounded', async (t) => {
  const { h, upstream } = await nonceHarness(t);
  const { cookie } = await signIn(h.url, { user: 'erin' });
  upstream.nonce = 'has "quotes"';
  const before = upstream.checks.length;
  const refused = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(refused.status, 401, 'a nonce that is not NQCHARs (RFC 9449 §8.1) is not used: the 401 as it is');
  t.equal(upstream.checks.length - before, 1, 'no retry with it');
  t.equal((await verifiedProof(upstream.checks.at(-1)!.proof)).nonce, undefined);

  // The nonces a DPopKeys remembers are bounded: 256 origins, least recently used dropped.
  const keys = h.gateway.context.providers.default.dpop!;
  const record = (await storedTokens(h, 'erin'))!;
  keys.rememberNonce('http://first.example', 'oldest');
  const first = async () => (await verifiedProof(await keys.proof(record.dpopKey!, 'GET', new URL('http://first.example/x'), record.accessToken))).nonce;
  t.equal(await first(), 'oldest');
  for (let i = 0; i < 256; i++) keys.rememberNonce(`http://o${i}.example`, `n${i}`);
  const dropped = new URL('http://first.example/x');
  // The key's openid-client handle remembers what it signed with last; a new key shows the gateway's own cache.
  const fresh = await keys.generate();
  t.equal((await verifiedProof(await keys.proof(fresh.key, 'GET', dropped, 'token'))).nonce, undefined, 'the 257th origin pushed out the first');
  t.equal((await verifiedProof(await keys.proof(fresh.key, 'GET', new URL('http://o255.example/y'), 'token'))).nonce, 'n255');
});
