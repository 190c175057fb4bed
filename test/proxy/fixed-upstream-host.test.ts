import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';

/**
 * README "How it works": only the configured upstream is ever contacted with a token;
 * nothing in a request (absolute-form target, Host, X-Forwarded-Host,
 * protocol-relative or user-info paths) can choose another host.
 */
t.test('a request cannot choose another upstream host', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const evil = await startScriptedUpstream();
  t.teardown(() => evil.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const evilHost = new URL(evil.url).host;
  const upstreamHost = new URL(h.upstream.url).host;

  const attempts: Array<{ name: string; path: string; headers?: Record<string, string> }> = [
    { name: 'absolute-form target', path: `${evil.url}/api/headers`, headers: { host: evilHost } },
    { name: 'absolute-form target, gateway Host', path: `${evil.url}/api/headers` },
    { name: 'Host header of another server', path: '/api/headers', headers: { host: evilHost } },
    { name: 'X-Forwarded-Host of another server', path: '/api/headers', headers: { 'x-forwarded-host': evilHost } },
    { name: 'protocol-relative path', path: `//${evilHost}/api/headers` },
    { name: 'backslash path', path: `/\\${evilHost}/api/headers` },
    { name: 'user-info path', path: `@${evilHost}/api/headers` },
    { name: 'encoded authority', path: `/%2F%2F${evilHost}/api/headers` },
  ];
  for (const attempt of attempts) {
    t.test(attempt.name, async (t) => {
      const before = h.upstream.received.length;
      const response = await httpSend(h.url, { path: attempt.path, headers: { cookie, ...attempt.headers } }).catch((err: Error) => err);
      t.equal(evil.seen.length, 0, 'the other server saw nothing');
      if (response instanceof Error) {
        t.equal(h.upstream.received.length, before, `the gateway closed the connection (${response.message}) and sent nothing upstream`);
        return;
      }
      t.ok(response.status < 500, `no 5xx (got ${response.status})`);
      for (const received of h.upstream.received.slice(before)) {
        t.equal(received.headers.host, upstreamHost, 'a request that went anywhere went to the configured upstream');
        t.notMatch(received.url, /^[a-z]+:/i, 'in origin form');
      }
    });
  }
});
