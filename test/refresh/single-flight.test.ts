import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { shortLoginTokens, storedTokens, waitUntilExpired } from '../helpers/refresh.js';

/**
 * README "What the browser sees": concurrent requests of one user cause one refresh. With rotation a
 * second refresh with the same refresh token would be refused and revoke the
 * grant (RFC 9700 §4.14.2), so the AS's own grant counters are the proof.
 */
t.test('50 concurrent requests of one user with an expired token cause one refresh', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2) });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  // Two browsers of the same user share one token record.
  const laptop = await signIn(h.url, { user: 'alice' });
  const phone = await signIn(h.url, { user: 'alice' });
  await waitUntilExpired(h, watch.issued.at(-1)!.accessToken!);
  const received = h.upstream.received.length;

  const responses = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      fetch(`${h.url}/api/me?i=${i}`, { headers: { cookie: i % 2 === 0 ? laptop.cookie : phone.cookie } }).then(async (response) => ({
        status: response.status,
        body: (await response.json()) as { sub?: string },
      })),
    ),
  );
  t.strictSame(new Set(responses.map((r) => r.status)), new Set([200]), 'every request succeeded');
  t.ok(responses.every((r) => r.body.sub === 'alice'));
  t.equal(h.as.grants.refreshToken, 1, 'exactly one refresh grant at the AS');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'and no refused one');
  const refreshed = watch.issued.at(-1)!.accessToken;
  const sent = h.upstream.received.slice(received);
  t.equal(sent.length, 50);
  t.ok(sent.every((r) => r.headers.authorization === `Bearer ${refreshed}` && r.active), 'every request carried the one new token');
  t.equal((await storedTokens(h, 'alice'))?.accessToken, refreshed);

  // README "Observe": the one refresh counts as ok, the requests that waited for it as joined.
  const metrics = await (await fetch(`${h.gateway.adminAddress}/metrics`)).text();
  // The sign-in token's series (the counter is labelled by target too, README "A token for each API").
  const count = (result: string) =>
    Number(new RegExp(`^gatehouse_token_refreshes_total\\{(?=[^}]*target="sign-in")(?=[^}]*result="${result}")[^}]*\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
  t.equal(count('ok'), 1, 'one refresh: ok');
  t.ok(count('joined') >= 1 && count('joined') <= 49, `the others waited for it: joined ${count('joined')}`);
  t.equal(count('failed'), 0);
});
