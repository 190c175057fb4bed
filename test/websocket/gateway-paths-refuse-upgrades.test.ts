import t from 'tap';
import WebSocket from 'ws';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

/**
 * README "WebSockets and server-sent events" and "Routes": the gateway's own paths come before every
 * route, for an upgrade as for a request. Under a `/` route with
 * `websocket: true`, an upgrade on a configured `paths.*` is refused and
 * never reaches the upstream.
 */

t.test('an upgrade on any of the configured paths.* is refused (400) under a websocket `/` route; the upstream sees nothing', async (t) => {
  const upstream = await startWebSocketUpstream();
  const h = await startHarness({
    config: () => ({
      // One path moved: the refusal follows the configuration, not a list of defaults.
      paths: { session: '/auth/session' },
      routes: [{ path: '/', upstream: upstream.url, websocket: true }],
    }),
  });
  upstream.as = h.as;
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'path-prober' });

  const status = (path: string) =>
    new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${h.url.replace('http', 'ws')}${path}`, { headers: { cookie }, origin: h.url });
      socket.once('open', () => {
        socket.terminate();
        resolve(101);
      });
      socket.once('unexpected-response', (_request, response) => {
        response.resume();
        resolve(response.statusCode!);
      });
      socket.once('error', reject);
    });

  const before = upstream.handshakes.length;
  for (const path of ['/login', '/callback', '/logout', '/auth/session', '/signed-out', '/backchannel-logout', '/forward-auth', '/forward-auth/api/x', '/logout?everywhere=1']) {
    t.equal(await status(path), 400, `${path}: refused`);
  }
  t.equal(upstream.handshakes.length, before, 'no refused upgrade reached the upstream');

  t.equal(await status('/session'), 101, '/session is no gateway path once paths.session moved: the route takes it');
  t.equal(upstream.handshakes.length, before + 1);
});
