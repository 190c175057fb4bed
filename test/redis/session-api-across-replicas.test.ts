import t from 'tap';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { get, signInAcross, startReplicas, within } from './replicas.js';

/**
 * README "Ending sessions": on replicas sharing a real redis-server, the
 * session API of either replica lists the sessions made on both and ends
 * them on both: the browsers get 401 wherever they land, and a WebSocket
 * held open by the other replica closes with 1008 within 5 s.
 */
const TOKEN = randomBytes(32).toString('base64url');
const WITHIN_MS = 5000;

t.test('the session API of one replica lists and ends the sessions of every replica', { skip: redisMissing }, async (t) => {
  const upstream = await startWebSocketUpstream();
  t.teardown(() => upstream.close());
  const { h, urls, gateways } = await startReplicas(t, 2, {
    config: { admin: { host: '127.0.0.1', port: 0, token: TOKEN }, routes: [{ path: '/', upstream: upstream.url, websocket: true }] },
  });
  upstream.as = h.as;
  const [a, b] = urls as [string, string];
  const api = (gateway: number, path: string, method = 'GET') =>
    fetch(`${gateways[gateway]!.adminAddress}${path}`, { method, headers: { authorization: `Bearer ${TOKEN}` } });

  const onA = await signIn(a, { user: 'alice' });
  const onB = { cookie: (await signInAcross(b, b, 'alice')).cookie! };
  const carol = { cookie: (await signInAcross(b, b, 'carol')).cookie! };
  for (const base of [a, b]) for (const { cookie } of [onA, onB]) t.equal((await get(base, '/session', cookie)).status, 200);

  const listed = (await (await api(0, '/sessions?user=alice')).json()) as { sessions: Array<{ handle: string }> };
  t.equal(listed.sessions.length, 2, 'replica A lists the session made on B too');
  const fromB = (await (await api(1, '/sessions?user=alice')).json()) as { sessions: Array<{ handle: string }> };
  t.strictSame(fromB.sessions.map((s) => s.handle).sort(), listed.sessions.map((s) => s.handle).sort(), 'both replicas list the same handles');

  // One session ended by handle on A: the one made on B, whose browser then lands on B.
  const handleOfB = h.gateway.context.sessionHandles.of((await import('../../src/session/session-id.js')).hashSessionId(onB.cookie.split('=')[1]!));
  t.strictSame(await (await api(0, `/sessions/${handleOfB}`, 'DELETE')).json(), { ended: 1 });
  // README "Run several replicas (Redis)": B's cache hears of the deletion within 200 ms.
  await within('B refuses the session ended on A', 200, async () => (await get(b, '/session', onB.cookie)).status === 401);
  t.pass('ended on A, refused on B');
  t.equal((await get(a, '/session', onA.cookie)).status, 200, 'the other session goes on');

  // A WebSocket held by replica B; every session of alice ended through replica A's API.
  const socket = new WebSocket(`${b.replace('http', 'ws')}/socket`, { headers: { cookie: onA.cookie }, origin: h.url });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  const closed = new Promise<{ code: number; afterMs: number }>((resolve) => {
    const started = Date.now();
    socket.once('close', (code) => resolve({ code, afterMs: Date.now() - started }));
  });
  t.strictSame(await (await api(0, '/sessions?user=alice', 'DELETE')).json(), { ended: 1 });
  const { code, afterMs } = await closed;
  t.equal(code, 1008, 'the socket on the other replica closes as a session that ended');
  t.ok(afterMs < WITHIN_MS, `within 5 s (${afterMs} ms)`);
  for (const base of [a, b]) t.equal((await get(base, '/session', onA.cookie)).status, 401, `refused on ${base === a ? 'A' : 'B'}`);
  t.notOk(h.logText().includes(onA.cookie.split('=')[1]!), 'no session id in the logs');
  t.strictSame(await (await api(1, '/sessions?user=alice')).json(), { sessions: [] }, 'B lists none left');
  t.equal((await get(a, '/session', carol.cookie)).status, 200, 'another user is not touched');
});
