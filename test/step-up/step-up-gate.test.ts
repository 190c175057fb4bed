import t from 'tap';
import WebSocket from 'ws';
import { startRoutesHarness, forgetSeen } from '../helpers/routes-harness.js';
import { signInAt } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { navigate } from '../helpers/navigate.js';
import { httpSend } from '../helpers/http-request.js';
import { TestClock } from '../helpers/clock.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

/**
 * README "Step-up", the gate half: a session whose sign-in does not meet a
 * route's stepUp is sent through sign-in (navigations) or refused with 401
 * and the RFC 9470 challenge (everything else), on a proxied request, a
 * forward-auth question and a WebSocket upgrade; nothing reaches the
 * upstream. An upstream's own RFC 9470 challenge starts the same step-up
 * for navigations.
 */
const PASSWORD = 'urn:gatehouse:test:pwd';
const MFA = 'urn:gatehouse:test:mfa';
const UPSTREAM_CHALLENGE = `Bearer error="insufficient_user_authentication", error_description="payments need a second factor", acr_values="${MFA}"`;

t.test('step-up at the gate', async (t) => {
  const clock = new TestClock();
  const sockets = await startWebSocketUpstream();
  const h = await startRoutesHarness(
    ({ web, api, docs }) => [
      { path: '/admin', upstream: api.url, stepUp: { acr: [MFA] }, headers: { 'X-User': 'sub' } },
      { path: '/recent', upstream: api.url, stepUp: { maxAge: 60 } },
      { path: '/admin-ws', upstream: sockets.url, websocket: true, stepUp: { acr: [MFA] } },
      { path: '/payments', upstream: docs.url },
      { path: '/', upstream: web.url },
    ],
    { signInLevels: { password: PASSWORD, secondFactor: MFA, alwaysAuthTime: true }, clock, config: { forwardAuth: { trustedProxies: ['127.0.0.1/32'] } } },
  );
  sockets.as = h.as;
  t.teardown(async () => {
    await h.close();
    await sockets.close();
  });
  h.docs.answer = (req, res) => {
    if (req.headers['x-met'] === undefined) {
      res.writeHead(401, { 'www-authenticate': UPSTREAM_CHALLENGE, 'content-type': 'application/json' }).end('{"error":"more please"}');
    } else res.end('paid');
  };

  const jar = new CookieJar();
  const weak = await signInAt(`${h.url}/login?returnTo=%2F`, { user: 'alice', jar });
  const cookie = weak.cookie!;

  t.test('a navigation goes through the step-up sign-in; nothing reaches the upstream', async (t) => {
    forgetSeen(h);
    const page = await navigate(`${h.url}/admin/users?page=2`, { cookie });
    t.equal(page.status, 302);
    t.equal(page.headers.location, `/login?returnTo=${encodeURIComponent('/admin/users?page=2')}&acr_values=${encodeURIComponent(MFA)}`);
    t.equal(page.headers['cache-control'], 'no-store');
    t.equal(h.api.seen.length, 0);
    const head = await navigate(`${h.url}/admin`, { cookie });
    t.equal(head.status, 302);
  });

  t.test('an API call gets 401 insufficient_user_authentication, the RFC 9470 challenge and the stepUp URL', async (t) => {
    forgetSeen(h);
    for (const method of ['GET', 'POST', 'DELETE']) {
      const response = await fetch(`${h.url}/admin/users`, { method, headers: { cookie, origin: h.url } });
      t.equal(response.status, 401, method);
      t.equal(response.headers.get('www-authenticate'), `Bearer error="insufficient_user_authentication", error_description="A stronger or more recent sign-in is required", acr_values="${MFA}"`);
      const body = (await response.json()) as { error: string; stepUp: string };
      t.equal(body.error, 'insufficient_user_authentication');
      t.equal(body.stepUp, `/login?returnTo=${encodeURIComponent(method === 'GET' ? '/admin/users' : '/')}&acr_values=${encodeURIComponent(MFA)}`);
    }
    t.equal(h.api.seen.length, 0, 'nothing upstream');
    t.equal((await fetch(`${h.url}/home`, { headers: { cookie } })).status, 200, 'the session is kept: other routes pass');
  });

  t.test('maxAge: a sign-in older than it is refused, a recent one passes', async (t) => {
    forgetSeen(h);
    t.equal((await fetch(`${h.url}/recent`, { headers: { cookie } })).status, 200, 'signed in a moment ago');
    clock.advance(61_000);
    const stale = await fetch(`${h.url}/recent`, { headers: { cookie } });
    t.equal(stale.status, 401);
    t.match(stale.headers.get('www-authenticate'), /, max_age=60$/);
    const page = await navigate(`${h.url}/recent/x`, { cookie });
    t.equal(page.headers.location, `/login?returnTo=${encodeURIComponent('/recent/x')}&max_age=60`);
    t.equal(h.api.seen.length, 1, 'only the first request reached the upstream');
  });

  t.test('WebSocket upgrade without the step-up: 401 with the challenge, no upstream handshake', async (t) => {
    const before = sockets.handshakes.length;
    const answer = await new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
      const socket = new WebSocket(`${h.url.replace('http', 'ws')}/admin-ws`, { headers: { cookie }, origin: h.url });
      socket.once('open', () => {
        socket.terminate();
        resolve({ status: 101, challenge: undefined });
      });
      socket.once('unexpected-response', (_request, response) => {
        response.resume();
        resolve({ status: response.statusCode!, challenge: response.headers['www-authenticate'] });
      });
      socket.once('error', reject);
    });
    t.equal(answer.status, 401);
    t.match(answer.challenge, /^Bearer error="insufficient_user_authentication"/);
    t.equal(sockets.handshakes.length, before);
  });

  t.test('forward-auth applies stepUp with the same answers, never a token', async (t) => {
    const ask = (uri: string, headers: Record<string, string> = {}) =>
      httpSend(h.url, { path: '/forward-auth', headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': uri, cookie, ...headers } });
    const refused = await ask('/admin/users');
    t.equal(refused.status, 401);
    t.equal(refused.headers.authorization, undefined);
    t.match(refused.headers['www-authenticate'], /insufficient_user_authentication/);
    t.same(JSON.parse(refused.body.toString('utf8')), { error: 'insufficient_user_authentication', stepUp: `${h.url}/login?returnTo=${encodeURIComponent('/admin/users')}&acr_values=${encodeURIComponent(MFA)}` });
    t.equal((await ask('/home')).status, 200, 'a route without stepUp passes');
  });

  t.test("an upstream's RFC 9470 challenge: navigations step up, API calls get its 401 unchanged", async (t) => {
    const refreshes = h.as.grants.refreshToken;
    const api = await fetch(`${h.url}/payments/pay`, { headers: { cookie } });
    t.equal(api.status, 401);
    t.equal(api.headers.get('www-authenticate'), UPSTREAM_CHALLENGE, 'as the upstream sent it');
    t.equal(await api.text(), '{"error":"more please"}');
    t.equal(h.as.grants.refreshToken, refreshes, 'no refresh-and-retry: a new token for the same sign-in would not help');
    const page = await navigate(`${h.url}/payments/pay?amount=5`, { cookie });
    t.equal(page.status, 302);
    t.equal(page.headers.location, `/login?returnTo=${encodeURIComponent('/payments/pay?amount=5')}&acr_values=${encodeURIComponent(MFA)}`);
    t.notOk(page.body.includes('more please'), "not the upstream's body");
  });

  t.test('after the step-up sign-in the same browser passes everywhere the stronger sign-in counts', async (t) => {
    forgetSeen(h);
    const page = await navigate(`${h.url}/admin/users`, { cookie });
    const stepped = await signInAt(new URL(page.headers.location as string, h.url), { user: 'alice', jar, secondFactor: true });
    t.equal(stepped.callback.status, 302);
    t.equal(stepped.callback.location, '/admin/users');
    const strong = stepped.cookie!;
    const back = await navigate(`${h.url}/admin/users`, { cookie: strong });
    t.equal(back.status, 200, 'back at the page');
    t.equal(h.api.seen.at(-1)?.headers['x-user'], 'alice', 'the upstream got the request as alice');
    t.equal((await fetch(`${h.url}/admin/users`, { headers: { cookie } })).status, 401, "the password-only session is not strengthened by another's step-up");

    // The upstream still refuses (it wants something else): the session meets the challenge, so no loop, its 401 as it is.
    const again = await navigate(`${h.url}/payments/pay`, { cookie: strong });
    t.equal(again.status, 401);
    t.equal(again.headers['www-authenticate'], UPSTREAM_CHALLENGE);
  });
});

t.test('stepUp with onUnauthenticated: page and 401', async (t) => {
  const h = await startRoutesHarness(
    ({ web, api }) => [
      { path: '/page', upstream: api.url, stepUp: { acr: [MFA] }, onUnauthenticated: 'page' },
      { path: '/json', upstream: api.url, stepUp: { acr: [MFA] }, onUnauthenticated: '401' },
      { path: '/', upstream: web.url },
    ],
    { signInLevels: { password: PASSWORD, secondFactor: MFA } },
  );
  t.teardown(() => h.close());
  const { cookie } = await signInAt(`${h.url}/login?returnTo=%2F`, { user: 'bob' });
  const page = await navigate(`${h.url}/page/x`, { cookie: cookie! });
  t.equal(page.status, 401);
  t.match(page.body, /stronger sign-in is required/i);
  t.match(page.body, new RegExp(`href="/login\\?returnTo=%2Fpage%2Fx&amp;acr_values=${encodeURIComponent(MFA).replaceAll('%', '%')}"`));
  const json = await navigate(`${h.url}/json/x`, { cookie: cookie! });
  t.equal(json.status, 401);
  t.match(JSON.parse(json.body), { error: 'insufficient_user_authentication' });
  t.equal(h.api.seen.length, 0);
});
