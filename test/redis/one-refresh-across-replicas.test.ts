import t from 'tap';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { get, startReplicas } from './replicas.js';
import { storedTokens } from '../helpers/refresh.js';

/**
 * README "Run several replicas (Redis)": concurrent requests of one user cause one refresh across all
 * replicas (a lock in Redis; the replica that waited re-reads the record).
 * The AS rotates refresh tokens, so a second refresh with the same refresh
 * token would fail with invalid_grant and revoke the grant: its own counters
 * are the proof.
 */
t.test('30 concurrent requests with an expired token, spread over three replicas, cause one refresh grant', { skip: redisMissing }, async (t) => {
  // Tokens from the sign-in live 2 s, refreshed ones 10 minutes (so only the first expires during the test).
  const accessTokenTtl = (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? 600 : 2);
  const { h, urls, gateways } = await startReplicas(t, 3, { accessTokenTtl, rotateRefreshTokens: true });
  const alice = await signIn(urls[0]!, { user: 'alice' });
  // Every replica caches the record with the soon-stale token.
  for (const url of urls) t.equal((await get(url, '/api/me', alice.cookie)).status, 200);
  const before = await storedTokens(h, 'alice');
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, before!.expiresAt - Date.now() + 50)));
  const received = h.upstream.received.length;

  const statuses = await Promise.all(Array.from({ length: 30 }, async (_, i) => (await get(urls[i % urls.length]!, `/api/me?i=${i}`, alice.cookie)).status));
  t.strictSame([...new Set(statuses)], [200], 'every request succeeded');
  t.equal(h.as.grants.refreshToken, 1, 'exactly one refresh grant at the AS');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'and no refused one');

  const after = await storedTokens(h, 'alice');
  t.not(after!.accessToken, before!.accessToken, 'the record holds the refreshed token');
  const sent = h.upstream.received.slice(received);
  t.equal(sent.length, 30);
  t.ok(
    sent.every((request) => request.headers.authorization === `Bearer ${after!.accessToken}` && request.active),
    'every replica sent the one new token',
  );
  const refreshes = await Promise.all(gateways.map(async (gateway) => (await (await fetch(`${gateway.adminAddress}/metrics`)).text()).match(/^gatehouse_token_refreshes_total\{target="sign-in",result="ok"\} (\d+)$/m)?.[1] ?? '0'));
  t.equal(refreshes.reduce((sum, count) => sum + Number(count), 0), 1, `one replica refreshed (ok per replica: ${refreshes.join(', ')})`);
});
