import t from 'tap';
import WebSocket from 'ws';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { redisMissing, startRedis } from '../helpers/redis.js';

/**
 * README "WebSockets and server-sent events": every 2 s each open socket's
 * session is read again from the store; a sweep starts only once the last
 * one has finished and reads at most 16 sessions at once. Here the store is
 * a real redis-server kept slow by back-to-back `DEBUG SLEEP`s (each command
 * waits up to 0.5 s, never long enough to count as down), with
 * `session.cacheSize: 1` so that every check reads Redis. A sweep of 96
 * sockets then outlasts its 2 s interval, and the gateway logs each such
 * sweep with when it started and how long it took: no two may overlap.
 * Without the guard a new sweep starts every 2 s beside the running ones.
 */

const SOCKETS = 96;
const SLOW_FOR_MS = 14_000;

t.test('on a slow store the socket sweeps never overlap, and every socket stays open', { skip: redisMissing }, async (t) => {
  const redis = await startRedis({ args: ['--enable-debug-command', 'local'] });
  const upstream = await startWebSocketUpstream();
  const h = await startHarness({
    store: redis.url,
    config: () => ({
      session: { cacheSize: 1 },
      limits: { perUserConcurrency: 0 },
      routes: [{ path: '/', upstream: upstream.url, websocket: true }],
    }),
  });
  upstream.as = h.as;
  t.teardown(async () => {
    await h.close();
    await upstream.close();
    await redis.close();
  });

  const { cookie } = await signIn(h.url, { user: 'many-sockets' });
  const sockets = await Promise.all(
    Array.from(
      { length: SOCKETS },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(`${h.url.replace('http', 'ws')}/socket`, { headers: { cookie }, origin: h.url });
          socket.once('open', () => resolve(socket));
          socket.once('error', reject);
          socket.once('unexpected-response', (_request, response) => reject(new Error(`refused ${response.statusCode}`)));
        }),
    ),
  );
  t.teardown(() => sockets.forEach((socket) => socket.terminate()));
  const closed: number[] = [];
  for (const socket of sockets) socket.once('close', (code) => closed.push(code));

  // Redis asleep for 0.5 s at a time, back to back: every store read waits, none times out.
  const slowUntil = Date.now() + SLOW_FOR_MS;
  const replies: string[] = [];
  while (Date.now() < slowUntil) replies.push(await redis.command('DEBUG', 'SLEEP', '0.5'));
  t.ok(replies.length > 15 && replies.every((reply) => reply === '+OK'), `redis slept ${replies.length} times`);
  // Let the running sweep finish with Redis awake.
  await new Promise((resolve) => setTimeout(resolve, 3000));

  const sweeps = h.logs
    .filter((line) => line.msg === 'websocket session sweep took longer than its interval')
    .map((line) => ({ start: line.startedAt as number, end: (line.startedAt as number) + (line.durationMs as number), sockets: line.sockets as number }));
  t.ok(sweeps.length >= 2, `${sweeps.length} sweeps outlasted their 2 s interval (the store was slow enough to matter)`);
  t.ok(
    sweeps.every((sweep) => sweep.sockets === SOCKETS),
    'each checked every socket',
  );
  // One read at a time would take a sleep per socket at least (96 x 0.5 s); 16 at once take a fraction of it.
  t.ok(
    sweeps.every((sweep) => sweep.end - sweep.start < (SOCKETS * 500) / 4),
    `sockets checked concurrently: each sweep took ${sweeps.map((sweep) => sweep.end - sweep.start).join(', ')} ms`,
  );
  const ordered = [...sweeps].sort((a, b) => a.start - b.start);
  const overlaps = ordered.filter((sweep, i) => i > 0 && sweep.start < ordered[i - 1]!.end);
  t.equal(overlaps.length, 0, `no sweep started while another was running (${JSON.stringify(ordered.map((s) => [s.start - ordered[0]!.start, s.end - ordered[0]!.start]))})`);
  t.same(closed, [], 'a slow store closes no socket');
  // On a loaded machine a read may pass the store's 2 s call timeout: that check fails and its socket stays open (above).
  t.comment(`${h.logs.filter((line) => line.msg === 'could not check a websocket session').length} checks timed out`);
});
