import t from 'tap';
import { signIn, startLogin } from '../helpers/sign-in.js';
import { startTargetsHarness, ORDERS, ORDERS_AUDIENCE } from '../helpers/targets-harness.js';
import { startDpopUpstream } from '../helpers/dpop-upstream.js';
import { introspect } from '../helpers/authorization-server-watch.js';
import { storedTokens } from '../helpers/refresh.js';

// README "A token for each API": the resources and scopes travel through PAR too; with provider.dpop the
// target's grant carries a proof and the upstream receives Authorization: DPoP with a proof for its request.

t.test('with pushed authorization the target resource is asked for over the back channel and granted', async (t) => {
  const h = await startTargetsHarness({ pushedAuthorization: 'required', config: { provider: { pushedAuthorization: 'required' } } });
  t.teardown(() => h.close());
  const pushed: Array<Record<string, unknown>> = [];
  h.as.provider.on('pushed_authorization_request.success', (ctx) => pushed.push({ ...ctx.oidc.params }));
  const { authorizationUrl } = await startLogin(h.url);
  t.same([...authorizationUrl.searchParams.keys()].sort(), ['client_id', 'request_uri'], 'only client_id and request_uri in the front channel');
  t.equal(pushed.at(-1)?.resource, ORDERS, 'the pushed request carried the resource');
  t.match(String(pushed.at(-1)?.scope), /orders\.read/, 'and the target scopes');
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const response = await fetch(`${h.url}/api/orders/1`, { headers: { cookie } });
  t.equal(response.status, 200, 'the AS issues the target token: the resource was granted at sign-in');
  t.equal(h.orders.checks.at(-1)?.aud, ORDERS_AUDIENCE);
});

t.test('with provider.dpop the target token is DPoP-bound and the upstream gets a valid proof for it', async (t) => {
  const dpopUpstream = await startDpopUpstream();
  const h = await startTargetsHarness({
    dpopBound: true,
    config: { provider: { dpop: true } },
    routes: ({ plain }) => [
      { path: '/api/plain', upstream: plain.url, token: 'none' },
      { path: '/api/orders', upstream: dpopUpstream.url, token: { resource: ORDERS, scopes: ['orders.read'] } },
    ],
  });
  dpopUpstream.introspection = { endpoint: `${h.as.listenUrl}/token/introspection`, ...h.as.introspection };
  t.teardown(async () => {
    await h.close();
    await dpopUpstream.close();
  });
  const { cookie } = await signIn(h.url, { user: 'bob' });
  for (let i = 0; i < 2; i += 1) {
    const response = await fetch(`${h.url}/api/orders/${i}`, { headers: { cookie } });
    t.equal(response.status, 200, await response.text());
    t.equal(dpopUpstream.checks.at(-1)?.verdict, 'ok', 'proof, ath and cnf.jkt checked by the upstream');
  }
  const token = /^DPoP (\S+)$/.exec(dpopUpstream.checks.at(-1)!.authorization ?? '')?.[1];
  const inspected = await introspect(h.as, token!, 'access_token');
  t.equal(inspected.aud, ORDERS_AUDIENCE, 'the target token');
  t.ok((inspected.cnf as { jkt?: string } | undefined)?.jkt, 'bound to a key');
  const record = await storedTokens(h, 'bob');
  t.not(token, record!.accessToken, 'not the sign-in token');
  t.equal(Object.values(record!.targets!)[0]!.bound, true);
});
