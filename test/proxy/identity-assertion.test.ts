import t, { type Test } from 'tap';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { calculateJwkThumbprint, createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { hashSessionId } from '../../src/session/session-id.js';
import { IdentityAssertions } from '../../src/assertion/identity-assertions.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

/**
 * README "Identity assertion": a route with `assertion` sends its upstream a
 * JWT signed by the gateway, which the upstream verifies with jose against
 * the gateway's own JWKS endpoint; a browser's copy of the header never
 * passes on any route; one signature per session, route and lifetime; two
 * keys rotate without a failed validation.
 */

function pkcs8(type: 'ec' | 'ed25519' | 'rsa', curve = 'P-256'): string {
  const { privateKey } =
    type === 'ec' ? generateKeyPairSync('ec', { namedCurve: curve }) : type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ed25519');
  return privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
}

/** An upstream that records the headers of every request and answers 200. */
async function recordingUpstream(t: Test) {
  const received: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
  const server = createServer((request, response) => {
    received.push({ path: request.url ?? '', headers: request.headers });
    response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

const newKey = pkcs8('ed25519');
const oldKey = pkcs8('ec');

t.test('identity assertions verified by the upstream against the gateway\'s JWKS', async (t) => {
  const upstream = await recordingUpstream(t);
  const h = await startHarness({
    extraClaims: { alice: { groups: ['payments', 'admins'] } },
    config: {
      assertion: { signingKeys: [newKey, oldKey], lifetime: '5m' },
      routes: [
        { path: '/orders', upstream: `${upstream.url}/v1`, assertion: { audience: 'orders', claims: ['email', 'groups', 'missing', 'iss'] } },
        { path: '/custom', upstream: upstream.url, assertion: { header: 'X-Identity' } },
        { path: '/plain', upstream: upstream.url },
        { path: '/open', upstream: upstream.url, auth: 'public' },
      ],
    },
  });
  t.teardown(() => h.close());
  const jwksUrl = new URL('/.well-known/jwks.json', h.url);
  const jwks = createRemoteJWKSet(jwksUrl);
  const alice = await signIn(h.url, { user: 'alice' });
  const last = () => upstream.received.at(-1)!;
  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${h.url}${path}`, { headers: { cookie: alice.cookie, ...headers } });

  t.test('GET paths.jwks: the public half of every key, cacheable', async (t) => {
    const response = await fetch(jwksUrl);
    t.equal(response.status, 200);
    t.match(response.headers.get('cache-control'), /max-age=\d+/);
    const { keys } = (await response.json()) as { keys: Array<Record<string, string>> };
    t.equal(keys.length, 2, 'both keys are published');
    t.match(keys[0], { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    t.match(keys[1], { kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    for (const key of keys) {
      t.notOk('d' in key || 'p' in key || 'q' in key, 'no private part');
      t.equal(key.kid, await calculateJwkThumbprint(key as never), 'kid is the RFC 7638 thumbprint');
    }
    t.equal((await fetch(jwksUrl, { method: 'POST' })).status, 405, 'never proxied');
  });

  let first = '';
  t.test('a signed-in request carries an assertion the upstream verifies with jose', async (t) => {
    t.equal((await get('/orders/7')).status, 200);
    first = last().headers['x-gatehouse-assertion'] as string;
    t.type(first, 'string');
    const { payload, protectedHeader } = await jwtVerify(first, jwks, { issuer: h.url, audience: 'orders', algorithms: ['EdDSA', 'ES256'] });
    t.equal(protectedHeader.alg, 'EdDSA', 'the first key signs');
    t.equal(protectedHeader.typ, 'JWT');
    const { keys } = (await (await fetch(jwksUrl)).json()) as { keys: Array<{ kid: string }> };
    t.equal(protectedHeader.kid, keys[0]!.kid);
    t.equal(payload.sub, 'alice');
    t.equal(payload.email, 'alice@example.com', 'a listed claim');
    t.strictSame(payload.groups, ['payments', 'admins'], 'a listed claim with its JSON type');
    t.notOk('missing' in payload, 'a listed claim the user lacks is left out');
    t.equal(payload.iss, h.url, 'a listed claim never overrides iss');
    t.equal(payload.exp! - payload.iat!, 300, 'exp is lifetime after iat');
    const handle = h.gateway.context.sessionHandles.of(hashSessionId(alice.cookie.split('=')[1]!));
    t.equal(payload.sid, handle, 'sid is the session handle');
    t.notOk(first.includes(alice.cookie.split('=')[1]!), 'never the session id');
  });

  t.test('the assertion is reused for the session and route, not signed per request', async (t) => {
    for (let i = 0; i < 3; i += 1) {
      await get('/orders/7');
      t.equal(last().headers['x-gatehouse-assertion'], first, 'the same JWT');
    }
    const phone = await signIn(h.url, { user: 'alice' });
    await fetch(`${h.url}/orders/7`, { headers: { cookie: phone.cookie } });
    const other = last().headers['x-gatehouse-assertion'] as string;
    t.not(other, first, 'another session of the user gets its own');
    t.not((await jwtVerify(other, jwks, { issuer: h.url, audience: 'orders' })).payload.sid, (await jwtVerify(first, jwks)).payload.sid);
  });

  t.test('the default audience is the upstream origin; the header name is the route\'s', async (t) => {
    await get('/custom/x');
    const headers = last().headers;
    t.notOk('x-gatehouse-assertion' in headers);
    const { payload } = await jwtVerify(headers['x-identity'] as string, jwks, { issuer: h.url, audience: upstream.url });
    t.equal(payload.sub, 'alice');
    t.notOk('email' in payload, 'no claim unless listed');
  });

  t.test('an assertion header from the browser is removed on every route', async (t) => {
    const forged = first;
    for (const path of ['/plain/x', '/open/x', '/custom/x']) {
      await fetch(`${h.url}${path}`, { headers: { cookie: alice.cookie, 'x-gatehouse-assertion': forged, x_gatehouse_assertion: 'forged', 'x-identity': 'forged' } });
      const headers = last().headers;
      t.notOk('x-gatehouse-assertion' in headers || 'x_gatehouse_assertion' in headers, `${path}: the browser's copy never passes`);
      if (path === '/custom/x') t.not(headers['x-identity'], 'forged', 'the route\'s own header is the gateway\'s');
      else t.notOk('x-identity' in headers, `${path}: nor another route's assertion header`);
    }
    // The phone's sign-in replaced alice's token record (new claims): her laptop's assertion was signed anew.
    await get('/orders/1');
    const current = last().headers['x-gatehouse-assertion'];
    await fetch(`${h.url}/orders/1`, { headers: { cookie: alice.cookie, 'x-gatehouse-assertion': 'forged' } });
    t.equal(last().headers['x-gatehouse-assertion'], current, 'on the assertion route the gateway\'s replaces it');
    await fetch(`${h.url}/open/x`);
    t.notOk('x-gatehouse-assertion' in last().headers, 'a public route sends none');
  });

  t.test('rotation: an assertion signed by the old key still verifies while that key is listed', async (t) => {
    // What the gateway signed before the new key went first: the same signer, with the old key alone.
    const before = await IdentityAssertions.create([oldKey], 300, h.url);
    const route = h.gateway.context.routes.match('/orders')!.assertion!;
    const old = await before.sign({ ...route, cache: new (await import('lru-cache')).LRUCache({ max: 1 }) }, 'x', { user: 'alice', claims: {} }, Date.now());
    t.equal(decodeProtectedHeader(old).alg, 'ES256');
    const { payload } = await jwtVerify(old, jwks, { issuer: h.url, audience: 'orders' });
    t.equal(payload.sub, 'alice', 'verified with the second, older key of the JWKS');
  });

  t.test('no assertion in the logs', async (t) => {
    t.notOk(h.logText().includes(first), 'the JWT is never logged');
  });
});

t.test('check refuses what cannot sign assertions', async (t) => {
  const base = {
    provider: { issuer: 'https://idp.example.com', clientId: 'x', clientSecret: 'y' },
    session: { encryptionKeys: [randomBytes(32).toString('base64')] },
  };
  const problems = (extra: Record<string, unknown>) => {
    try {
      loadConfig({ ...base, ...extra }, {});
      return [];
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
  };
  const route = (assertion: unknown, auth = 'required') => ({ routes: [{ path: '/', upstream: 'http://127.0.0.1:3000', auth, assertion }] });
  t.match(problems(route({})), ['routes[0].assertion: needs assertion.signingKeys (the keys that sign assertions)']);
  t.match(problems({ assertion: { signingKeys: [pkcs8('rsa')] } }), [/^assertion\.signingKeys\[0\]: is a rsa key; it must be EC P-256 \(ES256\) or Ed25519/]);
  t.match(problems({ assertion: { signingKeys: [pkcs8('ec', 'P-384')] } }), [/^assertion\.signingKeys\[0\]: is an EC secp384r1 key/]);
  t.match(problems({ assertion: { signingKeys: ['-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----'] } }), [/^assertion\.signingKeys\[0\]: must be an unencrypted PKCS#8 PEM private key/]);
  t.match(problems({ assertion: { signingKeys: [newKey], lifetime: '2h' } }), ['assertion.lifetime: must be at most 1h (an assertion cannot be taken back once sent)']);
  t.match(problems({ assertion: { signingKeys: [newKey] }, ...route({}, 'public') }), [/^routes\[0\]\.assertion: a public route has no user to assert/]);
  t.match(problems({ assertion: { signingKeys: [newKey] }, ...route({ header: 'Authorization' }) }), [/^routes\[0\]\.assertion\.header: the gateway sets Authorization itself/]);
  t.strictSame(problems({ assertion: { signingKeys: [newKey, oldKey], lifetime: '1h' }, ...route({ claims: ['email'] }) }), [], 'EC P-256 and Ed25519, 1h: accepted');
});
