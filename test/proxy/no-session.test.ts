import t, { type Test } from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { findSetCookie, isDeletion } from '../helpers/set-cookie.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { httpSend, type RawResponse } from '../helpers/http-request.js';

/**
 * README "What the browser sees" "any other path, no cookie or unknown session id": 401, JSON
 * `{"error":"unauthorized"}` for API calls (`Accept: *\/*` and EventSource
 * included), a 302 through sign-in and back to the same path and query for
 * GET and HEAD navigations, the 401 page for other navigations, a stale
 * cookie cleared, and nothing sent upstream nor to the token endpoint.
 */
t.test('a proxied path without a live session', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  // A session that existed and was ended: its cookie is well-formed but unknown.
  const ended = await signIn(h.url, { user: 'olga' });
  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie: ended.cookie }, redirect: 'manual' })).status, 302);
  const grantsBefore = watch.requests;
  const received = h.upstream.received.length;

  const cookies: Array<[string, string | undefined]> = [
    ['no cookie', undefined],
    ['an ended session', ended.cookie],
    ['a well-formed unknown id', `session_id=${'A'.repeat(43)}`],
    ['a malformed id', 'session_id=not-a-session'],
    ['an empty id among other cookies', 'theme=dark; session_id=; lang=en'],
  ];
  const apiAccepts: Array<Record<string, string>> = [
    {},
    { accept: '*/*' },
    { accept: 'application/json' },
    { accept: 'application/json, */*' },
    { accept: 'text/event-stream' },
  ];
  const navigations: Array<Record<string, string>> = [
    { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    { accept: '*/*', 'sec-fetch-mode': 'navigate' },
  ];

  for (const [name, cookie] of cookies) {
    t.test(`${name}: API calls get 401 JSON`, async (t) => {
      for (const headers of apiAccepts) {
        for (const [method, path] of [['GET', '/api/me'], ['POST', '/api/echo'], ['DELETE', '/api/echo']] as const) {
          const response = await fetch(`${h.url}${path}?x=1`, { method, headers: { ...headers, ...(cookie ? { cookie } : {}) } });
          t.equal(response.status, 401, `${method} ${path} with ${JSON.stringify(headers)}`);
          t.match(response.headers.get('content-type'), /^application\/json/);
          t.strictSame(await response.json(), { error: 'unauthorized' });
          checkCookieCleared(t, response, cookie);
        }
      }
    });

    t.test(`${name}: GET and HEAD navigations are sent through sign-in and back`, async (t) => {
      for (const headers of navigations) {
        for (const method of ['GET', 'HEAD'] as const) {
          // fetch() always sends `Sec-Fetch-Mode: cors`; node:http sends what a browser's navigation does.
          const response = await httpSend(h.url, { method, path: '/orders?page=2', headers: { ...headers, ...(cookie ? { cookie } : {}) } });
          t.equal(response.status, 302, `${method} ${JSON.stringify(headers)}`);
          const location = new URL(String(response.headers.location), h.url);
          t.equal(location.origin, h.url, 'to the gateway itself');
          t.equal(location.pathname, '/login', 'to the sign-in path');
          t.equal(location.searchParams.get('returnTo'), '/orders?page=2', 'returning to the page asked for');
          t.equal(response.headers['cache-control'], 'no-store');
          checkCookieCleared(t, response, cookie);
        }
      }
    });

    t.test(`${name}: a POST navigation gets the 401 page with a sign-in link`, async (t) => {
      for (const headers of navigations) {
        const response = await httpSend(h.url, { method: 'POST', path: '/orders?page=2', headers: { ...headers, ...(cookie ? { cookie } : {}) } });
        t.equal(response.status, 401, JSON.stringify(headers));
        t.match(response.headers['content-type'], /^text\/html/);
        const page = response.body.toString('utf8');
        const href = /<a\b[^>]*href="([^"]+)"/.exec(page)?.[1]?.replaceAll('&amp;', '&');
        t.ok(href, 'the page links somewhere');
        const link = new URL(href!, h.url);
        t.equal(link.pathname, '/login', 'to the sign-in path');
        t.equal(link.searchParams.get('returnTo'), '/', 'a POST is not repeated after sign-in');
        checkCookieCleared(t, response, cookie);
      }
    });
  }

  t.test('nothing reached the upstream or the token endpoint', async (t) => {
    t.equal(h.upstream.received.length, received, 'the upstream saw no request');
    t.equal(watch.requests, grantsBefore, 'no token request (no refresh)');
  });
});

function checkCookieCleared(t: Test, response: Response | RawResponse, cookie: string | undefined): void {
  const cleared = findSetCookie(response instanceof Response ? response : (response.headers['set-cookie'] ?? []), 'session_id');
  if (cookie?.includes('session_id=')) {
    t.ok(cleared && isDeletion(cleared) && cleared.value === '', 'the stale session cookie is cleared');
    t.equal(cleared?.attributes.get('path'), '/');
  } else {
    t.equal(cleared, undefined, 'no cookie to clear');
  }
}
