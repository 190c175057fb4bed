import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { forgetSeen, startRoutesHarness, type RoutesHarness } from '../helpers/routes-harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend, type RawResponse } from '../helpers/http-request.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { storedTokens } from '../helpers/refresh.js';
import { TestClock } from '../helpers/clock.js';

/**
 * README "Routes" (`allow`, `headers`): the user's claims are the ID token's
 * merged with userinfo, at sign-in and after each refresh. The AS is
 * oidc-provider with its default `conformIdTokenClaims`, so email, name and
 * groups reach the gateway through userinfo only (OpenID Connect Core §5.4),
 * as with any conformant provider. Identity headers, `allow` by email domain
 * and by group, forward-auth and WebSocket upgrades all see them.
 */

/** oidc-provider's userinfo endpoint. */
const USERINFO_PATH = '/me';

/** What the AS's userinfo endpoint was asked, and how it answers. */
interface UserinfoScript {
  calls: number;
  /** Answer with this `sub` instead of the user's own. */
  sub: string | undefined;
}

const claims: Record<string, Record<string, unknown>> = {
  alice: { groups: ['admins'] },
  bob: { groups: ['staff'] },
  eve: { email: 'eve@other.example', groups: ['staff'] },
};
const FORWARD_AUTH = { trustedProxies: ['127.0.0.1/32'] };
const ONE_HOUR = 60 * 60_000;

let h: RoutesHarness;
let sockets: WebSocketUpstream;
const clock = new TestClock();
const userinfo: UserinfoScript = { calls: 0, sub: undefined };
let watch: ReturnType<typeof watchTokenEndpoint>;

t.before(async () => {
  sockets = await startWebSocketUpstream();
  h = await startRoutesHarness(
    ({ web, api, docs }) => [
      { path: '/admin', upstream: api.url, allow: { claims: { groups: ['admins'] } }, headers: { 'X-Forwarded-Email': 'email' } },
      { path: '/staff', upstream: docs.url, allow: { emailDomains: ['example.com'] } },
      { path: '/ws', upstream: sockets.url, websocket: true, allow: { claims: { groups: ['admins'] } }, headers: { 'X-Forwarded-Email': 'email' } },
      { path: '/', upstream: web.url, headers: { 'X-Forwarded-User': 'sub', 'X-Forwarded-Email': 'email', 'X-Forwarded-Name': 'name' } },
    ],
    { clock, extraClaims: claims, config: { forwardAuth: FORWARD_AUTH } },
  );
  sockets.as = h.as;
  watch = watchTokenEndpoint(h.as);
  // The gateway reaches the AS through the harness's proxy: it counts userinfo requests and scripts their answers.
  h.asProxy.recorder = (exchange) => {
    if (exchange.path === USERINFO_PATH) userinfo.calls += 1;
  };
  h.asProxy.rewriteJson = (path, body) => (path === USERINFO_PATH && userinfo.sub !== undefined ? { ...body, sub: userinfo.sub } : body);
});
t.teardown(async () => {
  await h.close();
  await sockets.close();
});

/** Asks /forward-auth about `uri` as Traefik and Caddy do. */
function ask(uri: string, cookie: string): Promise<RawResponse> {
  return httpSend(h.url, {
    path: '/forward-auth',
    headers: { cookie, 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': uri },
  });
}

/** Opens a WebSocket through the gateway; resolves with the socket, or with the status of the refusal. */
function upgrade(path: string, cookie: string): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${h.url.replace('http', 'ws')}${path}`, { headers: { cookie }, origin: h.url });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_request, response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    socket.once('error', reject);
  });
}

async function upstreamHeaders(t: Test, path: string, cookie: string): Promise<Record<string, string | string[] | undefined>> {
  forgetSeen(h);
  const response = await fetch(`${h.url}${path}`, { headers: { cookie } });
  t.equal(response.status, 200, `${path} passes`);
  await response.arrayBuffer();
  return h.web.seen.at(-1)!.headers;
}

function idTokenPayload(idToken: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(idToken.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

t.test('the AS puts email, name and groups in userinfo only (oidc-provider default)', async (t) => {
  await signIn(h.url, { user: 'carol' });
  const idToken = idTokenPayload(watch.issued.at(-1)!.idToken!);
  t.equal(idToken.sub, 'carol');
  for (const claim of ['email', 'name', 'groups']) t.notOk(claim in idToken, `no ${claim} in the ID token`);
});

t.test('at sign-in: identity headers, allow by group and by email domain, forward-auth and upgrades see userinfo claims', async (t) => {
  const before = userinfo.calls;
  const [alice, eve] = [await signIn(h.url, { user: 'alice' }), await signIn(h.url, { user: 'eve' })];
  t.equal(userinfo.calls - before, 2, 'one userinfo call per sign-in');

  const headers = await upstreamHeaders(t, '/home', alice.cookie);
  t.equal(headers['x-forwarded-user'], 'alice');
  t.equal(headers['x-forwarded-email'], 'alice@example.com', 'email comes from userinfo');
  t.equal(headers['x-forwarded-name'], 'Alice', 'name comes from userinfo');
  t.match(await (await fetch(`${h.url}/session`, { headers: { cookie: alice.cookie } })).json(), { user: { sub: 'alice', email: 'alice@example.com', groups: ['admins'] } });

  forgetSeen(h);
  t.equal((await fetch(`${h.url}/admin/users`, { headers: { cookie: alice.cookie } })).status, 200, 'a group from userinfo passes allow');
  t.equal(h.api.seen.at(-1)?.headers['x-forwarded-email'], 'alice@example.com');
  t.equal((await fetch(`${h.url}/admin/users`, { headers: { cookie: eve.cookie } })).status, 403, 'without the group: 403');
  t.equal((await fetch(`${h.url}/staff/x`, { headers: { cookie: alice.cookie } })).status, 200, 'an email domain from userinfo passes allow');
  t.equal((await fetch(`${h.url}/staff/x`, { headers: { cookie: eve.cookie } })).status, 403, 'another domain: 403');
  t.equal(h.api.seen.length + h.docs.seen.length, 2, 'only the two allowed requests reached an upstream');

  const allowed = await ask('/admin/users', alice.cookie);
  t.equal(allowed.status, 200, 'forward-auth: the group from userinfo passes');
  t.equal(allowed.headers['x-forwarded-email'], 'alice@example.com', 'forward-auth: the identity header from userinfo');
  t.equal((await ask('/admin/users', eve.cookie)).status, 403, 'forward-auth: without the group, 403');
  t.equal((await ask('/staff/x', alice.cookie)).status, 200, 'forward-auth: the email domain from userinfo passes');

  const socket = await upgrade('/ws/room', alice.cookie);
  t.type(socket, WebSocket, 'upgrade: the group from userinfo passes');
  t.equal(sockets.handshakes.at(-1)?.headers['x-forwarded-email'], 'alice@example.com', 'upgrade: the identity header from userinfo');
  (socket as WebSocket).close();
  t.equal(await upgrade('/ws/room', eve.cookie), 403, 'upgrade: without the group, 403');

  const calls = userinfo.calls;
  for (let i = 0; i < 5; i += 1) {
    await (await fetch(`${h.url}/home`, { headers: { cookie: alice.cookie } })).arrayBuffer();
    await ask('/admin/users', alice.cookie);
  }
  t.equal(userinfo.calls, calls, 'requests with a fresh token never call userinfo');
});

t.test('after a refresh: the claims of the new userinfo, a group taken away and a group given', async (t) => {
  const [alice, bob] = [await signIn(h.url, { user: 'alice' }), await signIn(h.url, { user: 'bob' })];
  t.equal((await fetch(`${h.url}/admin/x`, { headers: { cookie: alice.cookie } })).status, 200, 'alice is an admin at sign-in');
  t.equal((await fetch(`${h.url}/admin/x`, { headers: { cookie: bob.cookie } })).status, 403, 'bob is not');

  claims.alice = { groups: ['staff'], name: 'Alice Liddell' };
  claims.bob = { groups: ['admins'] };
  t.teardown(() => {
    claims.alice = { groups: ['admins'] };
    claims.bob = { groups: ['staff'] };
  });
  const refreshes = h.as.grants.refreshToken;
  const calls = userinfo.calls;
  clock.advance(ONE_HOUR);

  const headers = await upstreamHeaders(t, '/home', alice.cookie);
  t.equal(h.as.grants.refreshToken, refreshes + 1, 'the stale token was refreshed');
  t.equal(userinfo.calls, calls + 1, 'and userinfo asked with the new access token');
  t.equal(headers['x-forwarded-email'], 'alice@example.com', 'a claim userinfo still gives is kept after the refresh');
  t.equal(headers['x-forwarded-name'], 'Alice Liddell', 'a changed claim is the new value');
  t.equal((await fetch(`${h.url}/admin/x`, { headers: { cookie: alice.cookie } })).status, 403, 'a group taken away: 403');
  t.equal((await ask('/admin/x', alice.cookie)).status, 403, 'forward-auth: 403');
  t.equal(await upgrade('/ws/room', alice.cookie), 403, 'upgrade: 403');
  t.equal((await fetch(`${h.url}/staff/x`, { headers: { cookie: alice.cookie } })).status, 200, 'the email domain still passes');

  t.equal((await fetch(`${h.url}/admin/x`, { headers: { cookie: bob.cookie } })).status, 200, 'a group given: bob passes after his refresh');
  t.equal((await ask('/admin/x', bob.cookie)).status, 200, 'forward-auth: 200');
  const socket = await upgrade('/ws/room', bob.cookie);
  t.type(socket, WebSocket, 'upgrade: opens');
  t.equal(sockets.handshakes.at(-1)?.headers['x-forwarded-email'], 'bob@example.com');
  (socket as WebSocket).close();
  t.equal(h.as.grants.refreshToken, refreshes + 2, 'one refresh each');
  t.equal(userinfo.calls, calls + 2, 'one userinfo call per refresh, none for the requests in between');
});

t.test("a userinfo answer for another sub fails the sign-in; after a refresh it ends the user's sessions", async (t) => {
  userinfo.sub = 'mallory';
  t.teardown(() => (userinfo.sub = undefined));
  await t.rejects(signIn(h.url, { user: 'dave' }), /callback answered 400 without a session_id cookie/, 'no session for a userinfo of another sub');
  t.equal(await storedTokens(h, 'dave'), null, 'no token record either');

  userinfo.sub = undefined;
  const dave = await signIn(h.url, { user: 'dave' });
  t.equal((await fetch(`${h.url}/home`, { headers: { cookie: dave.cookie } })).status, 200);
  userinfo.sub = 'mallory';
  clock.advance(ONE_HOUR);
  const after = await fetch(`${h.url}/home`, { headers: { cookie: dave.cookie, accept: 'application/json' } });
  t.equal(after.status, 401, 'the refresh named another user: signed out');
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: dave.cookie } })).status, 401, 'the session is gone');
  t.equal(await storedTokens(h, 'dave'), null, 'and the token record');
});

t.test('userinfo unreachable after a refresh: 503, the session and the rotated refresh token kept', async (t) => {
  const frank = await signIn(h.url, { user: 'frank' });
  const before = (await storedTokens(h, 'frank'))!;
  h.asProxy.pathModes.set(USERINFO_PATH, 'error503');
  t.teardown(() => h.asProxy.pathModes.delete(USERINFO_PATH));
  clock.advance(ONE_HOUR);
  const refreshes = h.as.grants.refreshToken;
  const down = await fetch(`${h.url}/home`, { headers: { cookie: frank.cookie, accept: 'application/json' } });
  t.equal(down.status, 503, 'claims that cannot be read are not guessed');
  t.equal(h.as.grants.refreshToken, refreshes + 1, 'the AS did refresh');
  const kept = (await storedTokens(h, 'frank'))!;
  t.not(kept.refreshToken, before.refreshToken, 'the rotated refresh token is stored');
  t.equal(kept.accessToken, before.accessToken, 'the new access token is not used');
  h.asProxy.pathModes.delete(USERINFO_PATH);
  const headers = await upstreamHeaders(t, '/home', frank.cookie);
  t.equal(headers['x-forwarded-email'], 'frank@example.com', 'once userinfo answers, the next request refreshes with the kept token and passes');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'no refresh token was used twice');
});
