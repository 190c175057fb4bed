import t from 'tap';
import { freePort, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * README "Logs": when the authorization server, the upstream or the store
 * fails, the log line names the cause (a system error code such as
 * ECONNREFUSED) and the endpoint (host and path), never a query string or a
 * secret; and a refused request (401) writes one line, not two.
 */

function linesOf(logs: Array<Record<string, unknown>>, msg: string): Array<Record<string, unknown>> {
  return logs.filter((line) => line.msg === msg);
}

t.test('AS unreachable at start: the discovery failure names ECONNREFUSED and the discovery URL', async (t) => {
  const dead = await freePort();
  const h = await startHarness({ config: { provider: { issuer: `http://127.0.0.1:${dead}/realms/demo` } } });
  t.teardown(() => h.close());
  const [line] = linesOf(h.logs, 'provider discovery failed');
  t.match(line, { level: 40, failure: { type: 'TypeError', code: 'ECONNREFUSED', endpoint: `127.0.0.1:${dead}/realms/demo/.well-known/openid-configuration` } });
});

t.test('upstream unreachable: 502, and the log names ECONNREFUSED, host and path, no query', async (t) => {
  const dead = await freePort();
  const h = await startHarness({ config: { upstream: `http://127.0.0.1:${dead}` } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const response = await fetch(`${h.url}/reports/7?token=not-for-logs`, { headers: { cookie } });
  t.equal(response.status, 502);
  const [line] = linesOf(h.logs, 'upstream failed');
  t.match(line, { failure: { code: 'ECONNREFUSED', endpoint: `127.0.0.1:${dead}/reports/7` } });
  t.notMatch(h.logText(), 'not-for-logs', 'no query string in any line');
});

t.test('store unreachable: 503, and the log names the cause and the store without its password, whatever its characters', async (t) => {
  // Raw @ and : are accepted in a Redis password (the user-info ends at the last @).
  for (const [password, fragments] of [
    ['hunter2-store-secret', ['hunter2-store-secret']],
    ['hunter2@store:secret@x', ['hunter2', 'store:secret', 'secret@x']],
    ['p%40ss%3Aw0rd', ['p%40ss', 'w0rd']],
  ] as const) {
    const dead = await freePort();
    const h = await startHarness({ store: `redis://gatehouse:${password}@127.0.0.1:${dead}/0` });
    const response = await fetch(`${h.url}/api/me`, { headers: { cookie: 'session_id=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } });
    t.equal(response.status, 503);
    const [line] = linesOf(h.logs, 'store unavailable');
    t.match(line, { code: 'GH_ERR_STORE_UNAVAILABLE', failure: { endpoint: `redis://127.0.0.1:${dead}/0` } });
    t.type((line?.failure as { code?: unknown } | undefined)?.code, 'string', `with a cause (${JSON.stringify(line?.failure)})`);
    for (const fragment of fragments) t.notOk(h.logText().includes(fragment), `never the password, nor ${fragment} of it`);
    await h.close();
  }
});

t.test('one 401, one log line: the access-log line carries the error code', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const response = await fetch(`${h.url}/api/me`, { headers: { 'x-request-id': 'one-401' } });
  t.equal(response.status, 401);
  await response.arrayBuffer();
  const lines = h.logs.filter((line) => line.reqId === 'one-401');
  t.equal(lines.length, 1, JSON.stringify(lines));
  t.match(lines[0], { msg: 'request completed', status: 401, code: 'GH_ERR_SESSION_REQUIRED' });
});
