import t from 'tap';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { redisMissing } from '../helpers/redis.js';
import { approveAtAuthorizationServer, startLogin } from '../helpers/sign-in.js';
import { cookieHeader, get, signInAcross, startReplicas } from './replicas.js';

/**
 * README "What the browser sees" and "Run several replicas (Redis)": a login started on one replica completes on any other, and a
 * state accepted once is refused afterwards on every replica.
 */
t.test('a login started on one replica completes on another; its state replayed on the first is refused', { skip: redisMissing }, async (t) => {
  const { h, urls } = await startReplicas(t, 2);
  const [a, b] = urls as [string, string];
  const watch = watchTokenEndpoint(h.as);

  const login = await signInAcross(a, b, 'dave');
  t.equal(login.status, 302, 'B completes the sign-in A started');
  t.ok(login.cookie, 'and sets a session cookie');
  t.equal((await get(a, '/api/me', login.cookie)).status, 200, 'the session works on A');
  t.equal((await get(b, '/api/me', login.cookie)).status, 200, 'and on B');

  const replay = await get(a, login.callbackPath, login.loginCookie);
  t.equal(replay.status, 400, 'the same callback on A is refused');
  t.match(replay.body, /invalid_state/);
  t.notOk(replay.setCookie.some((line) => /^session_id=[^;]/.test(line)), 'no session from the replay');
  t.equal(watch.codeExchanges, 1, 'the replay made no token request (refused on its state, before the code)');
});

t.test('one callback delivered to two replicas at once makes one session', { skip: redisMissing }, async (t) => {
  const { h, urls } = await startReplicas(t, 2);
  const watch = watchTokenEndpoint(h.as);
  for (let round = 0; round < 5; round += 1) {
    const { loginCookies, authorizationUrl } = await startLogin(urls[0]!);
    const redirect = await approveAtAuthorizationServer(authorizationUrl, `erin${round}`);
    const path = `${redirect.pathname}${redirect.search}`;
    const cookie = cookieHeader(loginCookies);
    const answers = await Promise.all(urls.map((url) => get(url, path, cookie)));
    t.strictSame(answers.map((answer) => answer.status).sort(), [302, 400], `round ${round}: one replica accepted the state, the other refused it`);
  }
  t.equal(watch.codeExchanges, 5, 'each code was exchanged once');
});
