import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startHarness, type Harness, type HarnessOptions } from '../helpers/harness.js';
import { approveAtAuthorizationServer, signIn, startLogin } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { decodeJwt, watchClientRequests } from '../helpers/client-requests.js';
import { startDpopUpstream, type DpopUpstream } from '../helpers/dpop-upstream.js';
import { storedTokens } from '../helpers/refresh.js';
import { TestClock } from '../helpers/clock.js';
import { DpopKeys } from '../../src/oauth/dpop.js';
import { EmbeddedJWK, calculateJwkThumbprint, jwtVerify, type JWK } from 'jose';

/**
 * README "Client authentication and sender-constrained tokens", DPoP (RFC
 * 9449) with `provider.dpop: true`, against oidc-provider with the client
 * registered `dpop_bound_access_tokens`, and an upstream that accepts a
 * token only with a valid proof of the key it is bound to.
 */

async function dpopHarness(t: Test, options: HarnessOptions = {}): Promise<{ h: Harness; upstream: DpopUpstream }> {
  const upstream = await startDpopUpstream();
  const h = await startHarness({
    dpopBound: true,
    ...options,
    config: (as) => {
      upstream.introspection = { endpoint: `${as.listenUrl}/token/introspection`, ...as.introspection };
      const extra = typeof options.config === 'function' ? options.config(as) : (options.config ?? {});
      return { ...extra, upstream: upstream.url, provider: { dpop: true, ...((extra.provider as object | undefined) ?? {}) } };
    },
  });
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  return { h, upstream };
}

const thumbprint = (jwk: { crv: string; kty: string; x: string; y: string }) =>
  createHash('sha256').update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y })).digest('base64url');

t.test('sign-in, proxy, refresh and logout with DPoP-bound tokens', async (t) => {
  const clock = new TestClock();
  const { h, upstream } = await dpopHarness(t, { clock });
  const seen = watchClientRequests(h.asProxy);
  const watch = watchTokenEndpoint(h.as);

  const { cookie } = await signIn(h.url, { user: 'alice' });
  const exchange = seen.find((r) => r.path === '/token' && r.params.grant_type === 'authorization_code');
  t.equal(exchange?.status, 200, 'the AS accepted the code exchange');
  t.ok(exchange?.dpop, 'which carried a DPoP proof');
  const exchangeProof = decodeJwt(exchange!.dpop!);
  t.match(exchangeProof.payload, { htm: 'POST', htu: `${h.as.url}/token` });

  const record = await storedTokens(h, 'alice');
  t.ok(record?.dpopKey?.d, 'the token record holds the private key');
  const jkt = thumbprint(record!.dpopKey!);
  t.equal(thumbprint(exchangeProof.header.jwk as never), jkt, 'the proof was made with that key');
  const first = watch.issued.at(-1)!.accessToken!;
  const info = await introspect(h.as, first, 'access_token');
  t.match(info, { active: true, token_type: 'DPoP', cnf: { jkt } }, 'the AS bound the access token to that key');

  const me = await fetch(`${h.url}/api/me?x=1`, { headers: { cookie, authorization: 'Bearer browser-junk', dpop: 'browser-junk' } });
  t.equal(me.status, 200, 'the validating upstream accepts the request');
  t.match(await me.json(), { sub: 'alice', jkt });
  const sent = upstream.checks.at(-1)!;
  t.equal(sent.authorization, `DPoP ${first}`, 'Authorization: DPoP <token>, the browser header replaced');
  const proof = decodeJwt(sent.proof!);
  t.match(proof.payload, { htm: 'GET', htu: `${upstream.url}/api/me`, ath: createHash('sha256').update(first).digest('base64url') }, 'htu is the upstream URL, without query');
  t.equal(proof.header.typ, 'dpop+jwt');
  t.equal((proof.header.jwk as Record<string, unknown>).d, undefined, 'the proof carries only the public key');

  const post = await fetch(`${h.url}/api/items`, { method: 'POST', headers: { cookie, origin: h.url }, body: 'x' });
  t.equal(post.status, 200);
  t.match(decodeJwt(upstream.checks.at(-1)!.proof!).payload, { htm: 'POST', htu: `${upstream.url}/api/items` }, 'a proof per method and URL');
  t.not(decodeJwt(upstream.checks.at(-1)!.proof!).payload.jti, proof.payload.jti, 'and per request');

  clock.advance(10 * 60_000);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'works after a refresh');
  const refresh = seen.find((r) => r.path === '/token' && r.params.grant_type === 'refresh_token');
  t.equal(refresh?.status, 200);
  t.equal(thumbprint(decodeJwt(refresh!.dpop!).header.jwk as never), jkt, 'the refresh request carries a proof of the same key');
  const refreshed = watch.issued.at(-1)!.accessToken!;
  t.not(refreshed, first);
  t.match(await introspect(h.as, refreshed, 'access_token'), { active: true, token_type: 'DPoP', cnf: { jkt } }, 'the refreshed token is bound to the same key');
  t.equal((await storedTokens(h, 'alice'))?.dpopKey?.x, record!.dpopKey!.x, 'the record keeps its key across refreshes');

  const refreshToken = watch.issued.at(-1)!.refreshToken!;
  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' })).status, 302);
  t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'logout revoked the refresh token');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401);

  const written = [h.logText(), ...readdirSync(h.dir).map((name) => readFileSync(join(h.dir, name)).toString('latin1'))].join('\n');
  t.notOk(written.includes(record!.dpopKey!.d), 'the private DPoP key is in neither the log nor the store file');
  t.notOk(written.includes(first), 'nor is the access token');
});

t.test('a copied token is useless without its key; the AS and the upstream refuse replayed or foreign proofs', async (t) => {
  const { h, upstream } = await dpopHarness(t);
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'bob' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  const token = watch.issued.at(-1)!.accessToken!;
  const captured = upstream.checks.at(-1)!.proof!;
  const target = `${upstream.url}/api/me`;

  const asBearer = await fetch(target, { headers: { authorization: `Bearer ${token}` } });
  t.equal(asBearer.status, 401, 'the token alone, as a bearer token, is refused');
  const noProof = await fetch(target, { headers: { authorization: `DPoP ${token}` } });
  t.equal(noProof.status, 401, 'as a DPoP token without a proof, refused');
  const replayed = await fetch(target, { headers: { authorization: `DPoP ${token}`, dpop: captured } });
  t.equal(replayed.status, 401, "the gateway's own proof, replayed, is refused");
  t.match(await replayed.json(), { error: 'replayed proof' });

  // An attacker's own key pair, signing proofs for the copied token.
  const attacker = new DpopKeys(h.gateway.context.providers.default.provider, 10);
  const { key: foreignKey } = await attacker.generate();
  const foreign = await fetch(target, { headers: { authorization: `DPoP ${token}`, dpop: await attacker.proof(foreignKey, 'GET', new URL(target), token) } });
  t.equal(foreign.status, 401, 'a valid proof made with another key is refused');
  t.match(await foreign.json(), { error: 'key not bound to token' });

  const userinfo = `${h.as.url}/me`;
  const foreignAtAs = await fetch(userinfo, { headers: { authorization: `DPoP ${token}`, dpop: await attacker.proof(foreignKey, 'GET', new URL(userinfo), token) } });
  t.equal(foreignAtAs.status, 401, 'the AS refuses a proof made with another key');
  t.match(foreignAtAs.headers.get('www-authenticate'), /invalid_token/);

  const record = (await storedTokens(h, 'bob'))!;
  const keys = h.gateway.context.providers.default.dpop!;
  const genuine = await keys.proof(record.dpopKey!, 'GET', new URL(userinfo), token);
  const once = await fetch(userinfo, { headers: { authorization: `DPoP ${token}`, dpop: genuine } });
  t.equal(once.status, 200, 'the AS accepts a genuine proof of the bound key');
  const twice = await fetch(userinfo, { headers: { authorization: `DPoP ${token}`, dpop: genuine } });
  t.equal(twice.status, 401, 'and refuses the same proof replayed');
  t.match(twice.headers.get('www-authenticate'), /invalid_dpop_proof|invalid_token/);
});

t.test('server nonces are honoured on token and refresh requests', async (t) => {
  const clock = new TestClock();
  const { h } = await dpopHarness(t, { dpopNonces: true, clock });
  const seen = watchClientRequests(h.asProxy);
  const { cookie } = await signIn(h.url, { user: 'carol' });
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'sign-in completes although the AS demands nonces');
  const exchanges = seen.filter((r) => r.path === '/token' && r.params.grant_type === 'authorization_code');
  t.equal(exchanges.at(-1)?.status, 200);
  t.ok(decodeJwt(exchanges.at(-1)!.dpop!).payload.nonce, 'the accepted proof carries the nonce the AS asked for');
  t.equal(exchanges[0]?.status, 400, 'after the AS asked for one (use_dpop_nonce)');
  clock.advance(10 * 60_000);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'and a refresh too');
  t.equal(seen.filter((r) => r.path === '/token' && r.params.grant_type === 'refresh_token').at(-1)?.status, 200);
});

t.test('all three together: private_key_jwt, PAR required and DPoP', async (t) => {
  const clock = new TestClock();
  const { h, upstream } = await dpopHarness(t, { authMethod: 'private_key_jwt', pushedAuthorization: 'required', clock, config: { provider: { pushedAuthorization: 'required' } } });
  const seen = watchClientRequests(h.asProxy);
  const { cookie } = await signIn(h.url, { user: 'dora' });
  t.equal(seen.find((r) => r.path === '/request')?.status, 201, 'the authorization request was pushed');
  const exchange = seen.find((r) => r.path === '/token' && r.params.grant_type === 'authorization_code')!;
  t.ok(exchange.params.client_assertion && exchange.dpop, 'the code exchange carries an assertion and a proof');
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
  t.equal(upstream.checks.at(-1)?.verdict, 'ok');
  clock.advance(10 * 60_000);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'after a refresh');
  const refresh = seen.find((r) => r.path === '/token' && r.params.grant_type === 'refresh_token')!;
  t.ok(refresh.params.client_assertion && refresh.dpop);
  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' })).status, 302);
  t.equal(seen.find((r) => r.path === '/token/revocation')?.status, 200);
  const written = h.logText();
  for (const line of h.clientPrivateKey!.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))) t.notOk(written.includes(line), 'no client key line in the log');
});

t.test('with dpop, a Bearer token from the AS is an AS error (503), never a silent downgrade', async (t) => {
  const { h, upstream } = await dpopHarness(t, { dpopBound: false, dpopSupported: false });
  const watch = watchTokenEndpoint(h.as);
  const { loginCookies, authorizationUrl } = await startLogin(h.url);
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'erin');
  const callback = await fetch(callbackUrl, { headers: { cookie: loginCookies.map((c) => c.split(';')[0]).join('; '), accept: 'application/json' }, redirect: 'manual' });
  t.equal(watch.codeExchanges, 1, 'the code was exchanged');
  t.equal(watch.issued.at(-1)?.grantType, 'authorization_code');
  t.equal(callback.status, 503, 'but a Bearer token where DPoP was asked for is refused');
  t.match(await callback.json(), { error: 'provider_unavailable' });
  t.equal(callback.headers.getSetCookie().some((c) => c.startsWith('session_id=') && !c.startsWith('session_id=;')), false, 'no session');
  t.ok(h.logs.some((line) => line.msg === 'token response unusable' && String(line.tokenType).toLowerCase() === 'bearer'), 'the log names the token type');
  t.equal(upstream.checks.length, 0, 'nothing reached the upstream');
});

t.test('every proxied request gets its own proof, which jose verifies: fresh jti and iat, htm/htu/ath of that request and token', async (t) => {
  const { h, upstream } = await dpopHarness(t);
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const token = watch.issued.at(-1)!.accessToken!;
  const jkt = thumbprint((await storedTokens(h, 'alice'))!.dpopKey!);
  const before = upstream.checks.length;
  const paths = Array.from({ length: 40 }, (_, i) => `/api/n${i % 4}`);
  const answers = await Promise.all(
    paths.map((path, i) => fetch(`${h.url}${path}?i=${i}`, { method: i % 2 === 0 ? 'GET' : 'POST', headers: { cookie, origin: h.url }, body: i % 2 === 0 ? undefined : 'x' })),
  );
  t.same(answers.map((answer) => answer.status), paths.map(() => 200), 'the validating upstream accepted every request');
  const checks = upstream.checks.slice(before);
  t.equal(checks.length, paths.length);
  const jtis = new Set<string>();
  const ath = createHash('sha256').update(token).digest('base64url');
  for (const check of checks) {
    const { payload, protectedHeader } = await jwtVerify(check.proof!, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: ['ES256'], maxTokenAge: 5 });
    t.equal(await calculateJwkThumbprint(protectedHeader.jwk as JWK), jkt, 'signed with the key the token is bound to');
    t.equal(payload.htm, check.method);
    t.equal(payload.htu, `${upstream.url}${check.path.split('?')[0]}`, 'htu without the query');
    t.equal(payload.ath, ath);
    t.ok(Math.abs(Date.now() / 1000 - payload.iat!) <= 5, 'iat is now');
    jtis.add(payload.jti!);
  }
  t.equal(jtis.size, checks.length, 'no two proofs share a jti');
});
