import t from 'tap';
import { randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import { forgetSeen, startRoutesHarness } from '../helpers/routes-harness.js';
import { signIn } from '../helpers/sign-in.js';
import { JwtIssuer, b64json } from '../helpers/jwt-issuer.js';
import { pseudonymOf } from '../helpers/harness.js';
import WebSocket from 'ws';
import { httpSend } from '../helpers/http-request.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

// README "Machine clients" through the real gateway: a loopback JWT issuer
// (discovery, JWKS), oidc-provider issuing client-credentials tokens and
// answering introspection, scripted upstreams that record what reached them.

const MACHINE = { clientId: 'nightly-report', clientSecret: randomBytes(12).toString('base64url') };
const INVALID_TOKEN = 'Bearer error="invalid_token"';

async function bearerMetrics(adminAddress: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${adminAddress}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^gatehouse_bearer_requests_total\{result="(\w+)"\} (\d+)$/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

t.test('machine clients on bearer routes', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const offline = await JwtIssuer.start();
  t.teardown(() => offline.close());
  const sockets = await startWebSocketUpstream();
  t.teardown(() => sockets.close());
  const h = await startRoutesHarness(
    ({ web, api, docs }) => [
      { path: '/api', upstream: api.url, accept: ['session', 'bearer'], headers: { 'X-Forwarded-User': 'sub', 'X-Team': 'team' } },
      { path: '/ops', upstream: api.url, accept: ['bearer'], allow: { claims: { team: ['ops'] } } },
      { path: '/quiet', upstream: docs.url, accept: ['session', 'bearer'], token: 'none' },
      { path: '/browser', upstream: web.url, onUnauthenticated: '401' },
      { path: '/ws', upstream: sockets.url, websocket: true, accept: ['session', 'bearer'], headers: { 'X-Forwarded-User': 'sub' } },
    ],
    {
      machineClients: [MACHINE],
      config: { forwardAuth: { trustedProxies: ['127.0.0.1/32'] }, machineClients: { issuers: [{ issuer: issuer.url, audiences: ['gatehouse'] }, { issuer: offline.url, audiences: ['gatehouse'] }], introspection: true, cacheTtl: '60s' } },
    },
  );
  t.teardown(() => h.close());
  const introspections: string[] = [];
  h.asProxy.recorder = (exchange) => {
    if (exchange.path === '/token/introspection') introspections.push(exchange.body);
  };
  const tokens: string[] = [];
  const sign = async (claims: Record<string, unknown>, options?: Parameters<JwtIssuer['sign']>[1]) => {
    const token = await issuer.sign(claims, options);
    tokens.push(token);
    return token;
  };
  const bearer = (token: string, extra: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${token}`, ...extra } });

  t.test('every result is counted at 0 from start-up', async (t) => {
    t.strictSame(await bearerMetrics(h.gateway.adminAddress), { accepted: 0, invalid: 0, refused: 0, unavailable: 0 });
  });

  t.test('an accepted JWT is a user of the route: its claims, its own token upstream, no cookie', async (t) => {
    forgetSeen(h);
    const token = await sign({ sub: 'system:serviceaccount:reports:nightly', aud: 'gatehouse', team: 'ops' });
    const response = await fetch(`${h.url}/api/orders?x=1`, bearer(token, { 'x-forwarded-user': 'admin', 'x-team': 'forged' }));
    t.equal(response.status, 200);
    t.equal(response.headers.get('set-cookie'), null, 'no cookie, no session');
    t.equal(h.api.seen.length, 1);
    const seen = h.api.seen[0]!.headers;
    t.equal(seen.authorization, `Bearer ${token}`, "the caller's own token, unchanged");
    t.equal(seen['x-forwarded-user'], 'system:serviceaccount:reports:nightly', 'identity headers from its claims, not the forged ones');
    t.equal(seen['x-team'], 'ops');
    t.equal((await fetch(`${h.url}/api/orders`, { method: 'POST', ...bearer(token, { origin: 'https://evil.example', 'content-type': 'application/json' }), body: '{}' })).status, 200, 'no CSRF rule for a bearer request');
    const line = h.logs.find((entry) => entry.msg === 'request completed' && entry.auth === 'bearer');
    t.ok(line, 'the access log says auth: bearer');
    t.equal(line?.userId, pseudonymOf(h, 'system:serviceaccount:reports:nightly'), 'and names the caller by its pseudonym');
    t.equal((await fetch(`${h.url}/ops/run`, bearer(token))).status, 200, 'allow passes on its claims');
  });

  t.test('every refusal: 401 invalid_token, nothing upstream', async (t) => {
    forgetSeen(h);
    const stranger = await JwtIssuer.start();
    t.teardown(() => stranger.close());
    const now = Math.floor(Date.now() / 1000);
    const good = await sign({ sub: 'job', aud: 'gatehouse' });
    const [, payload] = good.split('.') as [string, string];
    const publicPem = issuer.current.publicKey.export({ format: 'pem', type: 'spki' }) as string;
    const hsHeader = b64json({ alg: 'HS256', kid: issuer.current.kid });
    const { createHmac } = await import('node:crypto');
    const cases: Record<string, string> = {
      'wrong issuer': await stranger.sign({ sub: 'job', aud: 'gatehouse' }),
      'bad signature': await sign({ sub: 'job', aud: 'gatehouse' }, { key: JwtIssuer.newKey('ES256', issuer.current.kid) }),
      'alg none': `${b64json({ alg: 'none' })}.${payload}.`,
      'HS256 with the public key as secret': `${hsHeader}.${payload}.${createHmac('sha256', publicPem).update(`${hsHeader}.${payload}`).digest('base64url')}`,
      expired: await sign({ sub: 'job', aud: 'gatehouse', iat: now - 900, exp: now - 120 }),
      'not yet valid': await sign({ sub: 'job', aud: 'gatehouse', nbf: now + 300 }),
      'wrong audience': await sign({ sub: 'job', aud: 'billing' }),
      'unknown kid': await sign({ sub: 'job', aud: 'gatehouse' }, { key: JwtIssuer.newKey() }),
      'no exp': await new SignJWT({ iss: issuer.url, sub: 'job', aud: 'gatehouse' }).setProtectedHeader({ alg: 'ES256', kid: issuer.current.kid }).sign(issuer.current.privateKey),
      'an opaque token the AS does not know': randomBytes(32).toString('base64url'),
    };
    for (const [name, token] of Object.entries(cases)) {
      tokens.push(token);
      const response = await fetch(`${h.url}/api/orders`, bearer(token));
      t.equal(response.status, 401, name);
      t.equal(response.headers.get('www-authenticate'), INVALID_TOKEN, `${name}: WWW-Authenticate`);
      t.match(await response.json(), { error: 'invalid_token' }, `${name}: JSON`);
    }
    t.equal(h.api.seen.length, 0, 'nothing reached the upstream');
  });

  t.test('a caller that allow refuses gets 403, nothing upstream', async (t) => {
    forgetSeen(h);
    const token = await sign({ sub: 'intern-job', aud: 'gatehouse', team: 'marketing' });
    const response = await fetch(`${h.url}/ops/run`, bearer(token));
    t.equal(response.status, 403);
    t.match(await response.json(), { error: 'forbidden' });
    t.equal(h.api.seen.length, 0);
  });

  t.test('a bearer-only route: no token is 401 with a bare challenge, and a session does not pass', async (t) => {
    forgetSeen(h);
    const none = await fetch(`${h.url}/ops/run`);
    t.equal(none.status, 401);
    t.equal(none.headers.get('www-authenticate'), 'Bearer');
    const alice = await signIn(h.url, { user: 'alice', returnTo: '/api/me' });
    t.equal((await fetch(`${h.url}/ops/run`, { headers: { cookie: alice.cookie } })).status, 401);
    t.equal(h.api.seen.filter((seen) => seen.url.startsWith('/ops')).length, 0);
  });

  t.test('session and bearer on one route: without a bearer the session decides; with one, the token alone', async (t) => {
    forgetSeen(h);
    const alice = await signIn(h.url, { user: 'alice', returnTo: '/api/me' });
    forgetSeen(h);
    const response = await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie } });
    t.equal(response.status, 200);
    t.match(h.api.seen[0]!.headers.authorization, /^Bearer /);
    t.equal(h.api.seen[0]!.headers['x-forwarded-user'], 'alice');
    forgetSeen(h);
    const bad = await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie, authorization: 'Bearer not-a-good-token' } });
    t.equal(bad.status, 401, 'a bad token is refused even beside a good session');
    t.equal(h.api.seen.length, 0);
  });

  t.test('a route that does not accept bearer ignores the header and never passes it on', async (t) => {
    forgetSeen(h);
    const token = await sign({ sub: 'job', aud: 'gatehouse' });
    t.equal((await fetch(`${h.url}/browser/x`, bearer(token))).status, 401, 'no session: 401 as before');
    t.equal(h.web.seen.length, 0);
    const alice = await signIn(h.url, { user: 'alice', returnTo: '/browser/x' });
    forgetSeen(h);
    t.equal((await fetch(`${h.url}/browser/x`, { headers: { cookie: alice.cookie, authorization: `Bearer ${token}` } })).status, 200);
    t.not(h.web.seen[0]!.headers.authorization, `Bearer ${token}`, "the session's token goes upstream, not the caller's header");
  });

  t.test('token: none removes the caller\'s token', async (t) => {
    forgetSeen(h);
    const token = await sign({ sub: 'job', aud: 'gatehouse' });
    t.equal((await fetch(`${h.url}/quiet/x`, bearer(token))).status, 200);
    t.equal(h.docs.seen[0]!.headers.authorization, undefined);
  });

  t.test('a client-credentials token from the AS is introspected once within cacheTtl', async (t) => {
    forgetSeen(h);
    const grant = await fetch(`${h.as.listenUrl}/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${MACHINE.clientId}:${MACHINE.clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    });
    const { access_token: token } = (await grant.json()) as { access_token: string };
    tokens.push(token);
    introspections.length = 0;
    for (let i = 0; i < 3; i += 1) t.equal((await fetch(`${h.url}/api/orders`, bearer(token))).status, 200);
    t.equal(introspections.length, 1, 'three requests, one introspection');
    t.equal(h.api.seen.length, 3);
    t.equal(h.api.seen[0]!.headers.authorization, `Bearer ${token}`);
  });

  t.test('keys or introspection unreachable: 503, nothing upstream', async (t) => {
    forgetSeen(h);
    h.asProxy.mode = 'down';
    const opaque = randomBytes(32).toString('base64url');
    tokens.push(opaque);
    const response = await fetch(`${h.url}/api/orders`, bearer(opaque));
    h.asProxy.mode = 'up';
    t.equal(response.status, 503);
    t.match(await response.json(), { error: 'verification_unavailable' });
    offline.mode = 'down';
    const unverifiable = await offline.sign({ sub: 'job', aud: 'gatehouse' });
    tokens.push(unverifiable);
    const keysDown = await fetch(`${h.url}/api/orders`, bearer(unverifiable));
    t.equal(keysDown.status, 503, "the issuer's discovery and keys cannot be fetched");
    t.match(await keysDown.json(), { error: 'verification_unavailable' });
    offline.mode = 'up';
    t.equal((await fetch(`${h.url}/api/orders`, bearer(unverifiable))).status, 200, 'back: accepted');
    t.equal(h.api.seen.length, 1, 'only the last one reached the upstream');
  });

  t.test('forward-auth: the same decision, the caller\'s own token handed back for the proxy to copy', async (t) => {
    forgetSeen(h);
    const ask = (uri: string, headers: Record<string, string> = {}) =>
      httpSend(h.url, { path: '/forward-auth', headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': uri, ...headers } });
    const token = await sign({ sub: 'ci-job', aud: 'gatehouse', team: 'ops' });
    const allowed = await ask('/api/orders', { authorization: `Bearer ${token}` });
    t.equal(allowed.status, 200);
    t.equal(allowed.headers.authorization, `Bearer ${token}`);
    t.equal(allowed.headers['x-forwarded-user'], 'ci-job');
    t.equal(allowed.headers['set-cookie'], undefined);
    const forged = await ask('/api/orders', { authorization: `Bearer ${await sign({ sub: 'ci-job', aud: 'billing' })}` });
    t.equal(forged.status, 401);
    t.equal(forged.headers['www-authenticate'], INVALID_TOKEN);
    t.notOk('authorization' in forged.headers, 'a refusal carries no token');
    const refused = await ask('/ops/run', { authorization: `Bearer ${await sign({ sub: 'intern', aud: 'gatehouse', team: 'sales' })}` });
    t.equal(refused.status, 403);
    const none = await ask('/ops/run');
    t.equal(none.status, 401);
    t.equal(none.headers['www-authenticate'], 'Bearer');
    const line = [...h.logs].reverse().find((entry) => entry.msg === 'request completed' && entry.route === 'forward-auth' && entry.status === 200);
    t.match(line, { auth: 'bearer', userId: pseudonymOf(h, 'ci-job') });
    t.equal(h.api.seen.length, 0, 'forward-auth never proxies');
  });

  t.test('a WebSocket upgrade with a bearer token: no Origin needed, its own token and identity upstream', async (t) => {
    const token = await sign({ sub: 'stream-reader', aud: 'gatehouse' });
    const wsUrl = h.url.replace('http:', 'ws:');
    const socket = new WebSocket(`${wsUrl}/ws/feed`, { headers: { authorization: `Bearer ${token}` } });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const echoed = new Promise<string>((resolve) => socket.once('message', (data) => resolve(String(data))));
    socket.send('hello');
    t.equal(await echoed, 'hello');
    const handshake = sockets.handshakes.at(-1)!;
    t.equal(handshake.headers.authorization, `Bearer ${token}`);
    t.equal(handshake.headers['x-forwarded-user'], 'stream-reader');
    socket.close();
    const before = sockets.handshakes.length;
    const status = await new Promise<number>((resolve, reject) => {
      const refused = new WebSocket(`${wsUrl}/ws/feed`, { headers: { authorization: `Bearer ${token}x` } });
      refused.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      refused.once('open', () => reject(new Error('opened')));
      refused.once('error', () => undefined);
    });
    t.equal(status, 401, 'a bad token: 401');
    t.equal(sockets.handshakes.length, before, 'nothing reached the upstream');
  });

  t.test('the counters and the log', async (t) => {
    const counts = await bearerMetrics(h.gateway.adminAddress);
    t.ok(counts.accepted! >= 6, `accepted ${counts.accepted}`);
    t.ok(counts.invalid! >= 10, `invalid ${counts.invalid}`);
    t.equal(counts.refused, 2);
    t.equal(counts.unavailable, 2);
    const log = h.logText();
    for (const token of tokens) t.notOk(log.includes(token), 'no token in any log line');
  });
});
