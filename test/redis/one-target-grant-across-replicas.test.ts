import t from 'tap';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { get, startReplicas } from './replicas.js';
import { startAudienceUpstream } from '../helpers/audience-upstream.js';
import { storedTokens } from '../helpers/refresh.js';
import { introspect } from '../helpers/authorization-server-watch.js';

/**
 * README "A token for each API": concurrent requests of one user for one token target cause one grant across
 * replicas (the user's lock in Redis; a replica that waited re-reads the record and uses the token another
 * obtained). The AS rotates refresh tokens, so a second grant with the same refresh token would fail with
 * invalid_grant and revoke the grant: its counters are the proof.
 */
t.test('concurrent first requests for two targets, spread over two replicas on one redis-server, cause one grant per target', { skip: redisMissing }, async (t) => {
  const ORDERS = 'https://orders.example.com';
  const orders = await startAudienceUpstream('orders-api', ['orders.read']);
  const ledger = await startAudienceUpstream('ledger', ['ledger.read']);
  t.teardown(async () => {
    await orders.close();
    await ledger.close();
  });
  const { h, urls } = await startReplicas(t, 2, {
    rotateRefreshTokens: true,
    resourceServers: { [ORDERS]: { audience: 'orders-api', scopes: ['orders.read'] } },
    tokenExchange: { ledger: { audience: 'ledger', scopes: ['ledger.read'] } },
    config: {
      routes: [
        { path: '/api/orders', upstream: orders.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
        { path: '/api/ledger', upstream: ledger.url, token: { exchange: { audience: 'ledger', scopes: ['ledger.read'] } } },
      ],
    },
  });
  orders.as = h.as;
  ledger.as = h.as;
  const alice = await signIn(urls[0]!, { user: 'alice' });

  const requests = Array.from({ length: 24 }, (_, i) => get(urls[i % urls.length]!, `${i % 4 < 2 ? '/api/orders' : '/api/ledger'}/${i}`, alice.cookie));
  const statuses = (await Promise.all(requests)).map((answer) => answer.status);
  t.strictSame([...new Set(statuses)], [200], 'every request succeeded');
  t.equal(h.as.grants.byTarget[ORDERS], 1, 'one refresh grant for the resource target');
  t.equal(h.as.grants.byTarget.ledger, 1, 'one token exchange');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'no refused refresh grant');
  t.equal(new Set(orders.checks.map((check) => check.token)).size, 1, 'both replicas sent the one orders token');
  t.equal(new Set(ledger.checks.map((check) => check.token)).size, 1, 'and the one ledger token');
  t.ok(orders.checks.every((check) => check.verdict === 'ok') && ledger.checks.every((check) => check.verdict === 'ok'), 'each of its own audience');
  const record = await storedTokens(h, 'alice');
  t.equal((await introspect(h.as, record!.refreshToken!, 'refresh_token')).active, true, 'the stored refresh token is the live one');
});
