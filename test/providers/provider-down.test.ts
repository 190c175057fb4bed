import t from 'tap';
import { freePort, startHarness } from '../helpers/harness.js';
import { startLogin } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';

/**
 * README "Several identity providers": each provider is discovered on its
 * own, retried in the background while it does not answer. A named provider
 * that is down keeps the gateway unready and its sites' sign-ins at 503,
 * while the default provider's sign-in goes on.
 */
t.setTimeout(120_000);

t.test('a named provider that does not answer: not ready, its sign-in 503, the default provider unaffected', async (t) => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const h = await startHarness({
    config: (as) => ({
      providers: { partners: { issuer: closed, clientId: 'gh', clientSecret: 's3cret' } },
      sites: [{ host: 'partners.localhost', provider: 'partners', routes: [{ path: '/', upstream: as.url }] }],
    }),
  });
  t.teardown(() => h.close());
  const port = new URL(h.url).port;

  t.equal((await fetch(`${h.gateway.adminAddress}/readyz`)).status, 503, 'not ready while a provider has no metadata');
  t.ok(h.logs.some((line) => line.msg === 'provider discovery failed' && line.provider === 'partners'), 'the failure is logged with the provider name');

  const { authorizationUrl } = await startLogin(h.url, { returnTo: '/x' });
  t.equal(authorizationUrl.origin, new URL(h.as.url).origin, "the default provider's sign-in works");

  const partners = await httpSend(h.url, {
    path: `/login?returnTo=${encodeURIComponent(`http://partners.localhost:${port}/`)}`,
    headers: { accept: 'application/json' },
  });
  t.equal(partners.status, 503, "a partners site's sign-in: 503 while partners is unreachable");
  t.match(JSON.parse(partners.body.toString('utf8')), { error: String });
});
