import t from 'tap';
import WebSocket from 'ws';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { shortLoginTokens, waitUntilExpired, watchRefreshGrants } from '../helpers/refresh.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

/** README "WebSockets and server-sent events": an upgrade with a stale access token is refreshed first; the upstream's handshake carries the new one. */

t.test('a socket opened after the access token expired: one refresh grant, and the handshake bearer is the new token of the user', async (t) => {
  const upstream = await startWebSocketUpstream();
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2), config: () => ({ routes: [{ path: '/', upstream: upstream.url, websocket: true }] }) });
  upstream.as = h.as;
  t.teardown(async () => {
    await h.close();
    await upstream.close();
  });
  const watch = watchTokenEndpoint(h.as);
  const refreshes = watchRefreshGrants(h.as);
  const { cookie } = await signIn(h.url, { user: 'stale-socket' });
  const first = watch.issued.at(-1)!;
  await waitUntilExpired(h, first.accessToken!);
  t.equal(refreshes.length, 0, 'nothing refreshed before the upgrade');

  const open = () =>
    new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(`${h.url.replace('http', 'ws')}/live`, { headers: { cookie }, origin: h.url });
      socket.once('open', () => resolve(socket));
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, response) => reject(new Error(`refused ${response.statusCode}`)));
    });
  const socket = await open();
  t.teardown(() => socket.terminate());

  t.equal(refreshes.length, 1, 'exactly one refresh grant at the AS');
  t.equal(refreshes[0]!.refresh_token, first.refreshToken, 'with the stored refresh token');
  const refreshed = watch.issued.at(-1)!;
  t.equal(refreshed.grantType, 'refresh_token');
  const handshake = upstream.handshakes.at(-1)!;
  t.equal(handshake.headers.authorization, `Bearer ${refreshed.accessToken}`, 'the handshake carries the refreshed token, not the expired one');
  t.equal(handshake.sub, 'stale-socket', 'which introspects at the AS as the user');

  const second = await open();
  second.terminate();
  t.equal(refreshes.length, 1, 'a second socket uses the refreshed token without another grant');
});
