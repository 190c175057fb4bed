import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "Step-up": what `check` accepts and refuses in a route's `stepUp`. */

const withRoutes = (routes: unknown[], extra: Record<string, Record<string, unknown> | string> = {}) => ({ ...withKeys(extra), routes });

t.test('a route with stepUp loads, maxAge as seconds', async (t) => {
  const config = loadConfig(withRoutes([{ path: '/admin', upstream: 'http://admin:8080', stepUp: { acr: ['urn:example:mfa', 'urn:example:hwk'], maxAge: '10m' } }]), {});
  t.strictSame(config.routes![0]!.stepUp, { acr: ['urn:example:mfa', 'urn:example:hwk'], maxAge: 600 });
  const onlyAge = loadConfig(withRoutes([{ path: '/admin', upstream: 'http://admin:8080', stepUp: { maxAge: 30 } }]), {});
  t.strictSame(onlyAge.routes![0]!.stepUp, { maxAge: 30 });
  t.equal(loadConfig(withRoutes([{ path: '/', upstream: 'http://web' }]), {}).routes![0]!.stepUp, undefined, 'no default');
});

t.test('stepUp only on required routes, with acr or maxAge, maxAge above 0', async (t) => {
  const problems = problemsOf(
    withRoutes([
      { path: '/open', upstream: 'http://web', auth: 'optional', stepUp: { acr: ['urn:mfa'] } },
      { path: '/pub', upstream: 'http://web', auth: 'public', stepUp: { maxAge: 60 } },
      { path: '/empty', upstream: 'http://web', stepUp: {} },
      { path: '/zero', upstream: 'http://web', stepUp: { maxAge: 0 } },
      { path: '/ok', upstream: 'http://web', stepUp: { acr: ['urn:mfa'], maxAge: '5m' } },
      { path: '/machines', upstream: 'http://web', accept: ['session', 'bearer'], stepUp: { acr: ['urn:mfa'] } },
    ]),
  );
  t.strictSame(problems.sort(), [
    'routes[0].stepUp: only on a route with auth: required (it has auth: optional; without a session the request would pass anyway)',
    'routes[1].stepUp: only on a route with auth: required (it has auth: public; without a session the request would pass anyway)',
    'routes[2].stepUp: give acr (acceptable acr values) and/or maxAge (how old the sign-in may be)',
    'routes[3].stepUp.maxAge: must be greater than 0 (a sign-in is never younger than 0 seconds)',
    'routes[5].accept: bearer needs machineClients.issuers or machineClients.introspection: true, else no token could ever be accepted',
    "routes[5].stepUp: cannot go with accept: bearer (a machine client's token has no sign-in to step up); give the machine clients a route of their own",
  ]);
});

t.test('schema problems in stepUp name the key', async (t) => {
  t.match(problemsOf(withRoutes([{ path: '/a', upstream: 'http://a', stepUp: { acr: [] } }])), [/^routes\[0\]\.stepUp\.acr: must be a list of 1 to 10 acr values/]);
  t.match(problemsOf(withRoutes([{ path: '/a', upstream: 'http://a', stepUp: { acr: ['urn:a b'] } }])), [/^routes\[0\]\.stepUp\.acr\[0\]: must be an acr value/]);
  t.match(problemsOf(withRoutes([{ path: '/a', upstream: 'http://a', stepUp: { acr: ['say "mfa"'] } }])), [/^routes\[0\]\.stepUp\.acr\[0\]: must be an acr value/]);
  t.match(problemsOf(withRoutes([{ path: '/a', upstream: 'http://a', stepUp: { maxAge: 'soon' } }])), [/^routes\[0\]\.stepUp\.maxAge: must be a duration/]);
  t.match(problemsOf(withRoutes([{ path: '/a', upstream: 'http://a', stepUp: { acr: ['x'], level: 2 } }])), [/^routes\[0\]\.stepUp\.level: unknown key/]);
});

t.test('stepUp needs an OpenID provider: acr and auth_time are ID token claims', async (t) => {
  const route = { path: '/admin', upstream: 'http://admin', stepUp: { acr: ['urn:mfa'] } };
  t.strictSame(problemsOf(withRoutes([route], { provider: { scopes: ['profile'] } })), [
    'routes[0].stepUp: needs an OpenID provider (provider.issuer and the openid scope): acr and auth_time come from its ID token',
  ]);
  const plain = {
    ...withRoutes([route]),
    provider: { authorizationEndpoint: 'https://as.example.com/authorize', tokenEndpoint: 'https://as.example.com/token', userinfoEndpoint: 'https://as.example.com/me', clientId: 'c', clientSecret: 's' },
  };
  t.strictSame(problemsOf(plain), ['routes[0].stepUp: needs an OpenID provider (provider.issuer and the openid scope): acr and auth_time come from its ID token']);
});
