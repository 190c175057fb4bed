import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { TestClock } from '../helpers/clock.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { navigate } from '../helpers/navigate.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { hashSessionId } from '../../src/session/session-id.js';

const IDLE_SECONDS = 2;

/**
 * session.idleTimeout: a session used regularly lives on (sliding); one left
 * unused for longer than the idle timeout ends with a clean 401, cookie
 * cleared, and as the user's last session its refresh token is revoked. The
 * last use is written to the store at most every tenth of the idle timeout,
 * not at every request.
 */
t.test('idle timeout of 2 s', async (t) => {
  const clock = new TestClock();
  const h = await startHarness({ config: { session: { idleTimeout: IDLE_SECONDS } }, clock });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const store = h.gateway.context.store;

  t.test('a session in use outlives the idle timeout; a burst of requests records its use once', async (t) => {
    const { cookie } = await signIn(h.url, { user: 'alice' });
    const hash = hashSessionId(cookie.slice(cookie.indexOf('=') + 1));
    const seenAt = new Set<number>();
    for (let i = 0; i < 20; i += 1) {
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
      seenAt.add((await store.getSession(hash))!.seenAt!);
    }
    const recorded = [...seenAt].sort((a, b) => a - b);
    const gaps = recorded.slice(1).map((at, i) => at - recorded[i]!);
    t.ok(recorded.length < 20, `20 requests recorded ${recorded.length} use(s)`);
    t.ok(
      gaps.every((gap) => gap >= (IDLE_SECONDS * 1000) / 10),
      `recorded uses are at least a tenth of the idle timeout apart: ${gaps.join(', ')} ms`,
    );
    const started = clock.now();
    while (clock.now() - started < IDLE_SECONDS * 2000) {
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'still signed in');
      clock.advance(300);
    }
    t.ok(clock.now() - started >= IDLE_SECONDS * 2000, 'used for twice the idle timeout');
  });

  t.test('a session left alone ends: 401, cookie cleared, the last session revokes the refresh token', async (t) => {
    const { cookie } = await signIn(h.url, { user: 'bob' });
    const refreshToken = watch.issued.at(-1)!.refreshToken!;
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200);
    clock.advance(IDLE_SECONDS * 1000 + 500);
    const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(me.status, 401);
    t.strictSame(await me.json(), { error: 'unauthorized' });
    const cleared = findSetCookie(me, 'session_id');
    t.ok(cleared && isDeletion(cleared), 'the cookie is cleared');
    t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'the refresh token is revoked');
    const page = await navigate(`${h.url}/orders`, { cookie });
    t.equal(page.status, 302, 'a navigation is sent through sign-in (README "What the browser sees")');
    t.equal(page.headers.location, '/login?returnTo=%2Forders');
  });

  t.test("one idle browser ends; the user's busy browser keeps working and the refresh token stays", async (t) => {
    const idle = await signIn(h.url, { user: 'carol' });
    const busy = await signIn(h.url, { user: 'carol' });
    const refreshToken = watch.issued.at(-1)!.refreshToken!;
    const started = clock.now();
    while (clock.now() - started < IDLE_SECONDS * 1000 + 600) {
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: busy.cookie } })).status, 200);
      clock.advance(300);
    }
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: idle.cookie } })).status, 401, 'the idle browser is signed out');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: busy.cookie } })).status, 200, 'the busy one is not');
    t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, true, 'the shared refresh token is kept');
  });
});
