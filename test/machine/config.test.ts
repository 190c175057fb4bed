import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { configWarnings } from '../../src/config/checks.js';
import { compileRoutes } from '../../src/routing/route-table.js';
import { problemsOf, withKeys } from '../config/config-helpers.js';

// README "Machine clients": machineClients and routes' accept, what check refuses and warns about.

const K8S = { issuer: 'https://kubernetes.default.svc.cluster.local', jwksUri: 'https://kubernetes.default.svc/openid/v1/jwks', audiences: ['gatehouse'] };

t.test('defaults: no issuers, no introspection, 60 s cache; a route accepts a session only', async (t) => {
  const config = loadConfig({ ...withKeys({}), routes: [{ path: '/api', upstream: 'http://api:8080' }] }, {});
  t.strictSame(config.machineClients, { issuers: [], introspection: false, cacheTtl: 60 });
  t.strictSame(config.routes![0]!.accept, ['session']);
  const [route] = compileRoutes(config).routes;
  t.match(route, { acceptsSession: true, acceptsBearer: false });
  t.match(compileRoutes(loadConfig(withKeys({}), {})).routes[0], { acceptsSession: true, acceptsBearer: false }, 'the one-route form too');
});

t.test('a bearer route with a Kubernetes issuer and introspection loads', async (t) => {
  const config = loadConfig(
    {
      ...withKeys({ machineClients: { issuers: [K8S, { issuer: 'https://token.actions.githubusercontent.com', audiences: ['https://github.com/acme'], userIdClaim: 'repository' }], introspection: true, cacheTtl: '5m' } }),
      routes: [{ path: '/api', upstream: 'http://api:8080', accept: ['session', 'bearer'] }, { path: '/jobs', upstream: 'http://jobs:8080', accept: ['bearer'] }],
    },
    {},
  );
  t.equal(config.machineClients.cacheTtl, 300);
  t.equal(config.machineClients.issuers[0]!.userIdClaim, 'sub', 'userIdClaim defaults to sub');
  const routes = compileRoutes(config).routes;
  t.match(routes.find((route) => route.path === '/api'), { acceptsSession: true, acceptsBearer: true });
  t.match(routes.find((route) => route.path === '/jobs'), { acceptsSession: false, acceptsBearer: true });
  t.strictSame(configWarnings(config), []);
});

t.test('what check refuses, every problem at once under its key', async (t) => {
  const problems = problemsOf({
    ...withKeys({
      machineClients: {
        issuers: [
          { issuer: 'http://issuer.example.com', audiences: ['a'] },
          { issuer: 'https://ok.example.com', jwksUri: 'ftp://keys', audiences: ['a'] },
          { issuer: 'https://ok.example.com', audiences: ['b'] },
          { issuer: 'https://q.example.com/?x=1', audiences: ['a'] },
        ],
      },
    }),
    routes: [{ path: '/open', upstream: 'http://web:3000', auth: 'public', accept: ['session', 'bearer'] }],
  });
  t.strictSame(problems.sort(), [
    'machineClients.issuers[0].issuer: must be an absolute https URL (http is allowed only on localhost, 127.0.0.0/8 and [::1]) (the iss of the tokens, exactly)',
    'machineClients.issuers[1].jwksUri: must be an absolute https URL (http is allowed only on localhost, 127.0.0.0/8 and [::1])',
    'machineClients.issuers[2].issuer: same issuer as machineClients.issuers[1]; give one entry with all its audiences',
    'machineClients.issuers[3].issuer: must not contain a query, fragment or credentials (the iss of the tokens, exactly)',
    'routes[0].accept: bearer on a public route admits nothing it does not admit already (a public route reads no credentials); use auth: required or optional',
  ].sort());
});

t.test('accept: bearer needs an issuer or introspection; introspection needs discovery and client authentication', async (t) => {
  t.strictSame(problemsOf({ ...withKeys({}), routes: [{ path: '/api', upstream: 'http://api', accept: ['bearer'] }] }), [
    'routes[0].accept: bearer needs machineClients.issuers or machineClients.introspection: true, else no token could ever be accepted',
  ]);
  t.strictSame(
    problemsOf(
      withKeys({
        provider: { issuer: undefined, authorizationEndpoint: 'https://idp/auth', tokenEndpoint: 'https://idp/token', userinfoEndpoint: 'https://idp/me', clientId: 'g', clientSecret: 's' },
        machineClients: { introspection: true },
      }),
    ),
    ['machineClients.introspection: needs provider.issuer (the introspection endpoint comes from its discovery document)'],
  );
  t.strictSame(problemsOf(withKeys({ provider: { issuer: 'https://idp.example.com', clientId: 'g', clientAuthMethod: 'none' }, machineClients: { introspection: true } })), [
    'machineClients.introspection: needs a provider.clientAuthMethod other than none (the gateway authenticates to the introspection endpoint as its client)',
  ]);
});

t.test('schema problems name the key', async (t) => {
  const route = (accept: unknown) => ({ ...withKeys({}), routes: [{ path: '/api', upstream: 'http://api', accept }] });
  t.strictSame(problemsOf(route(['bearer', 'bearer'])), ['routes[0].accept: must be a list of session and/or bearer, each at most once']);
  t.strictSame(problemsOf(route([])), ['routes[0].accept: must be a list of session and/or bearer, each at most once']);
  t.match(problemsOf(route(['cookie'])), [/^routes\[0\]\.accept\[0\]: must be one of: session, bearer/]);
  t.match(problemsOf(withKeys({ machineClients: { issuers: [{ issuer: 'https://i.example.com', audiences: [] }] } })), [
    'machineClients.issuers[0].audiences: must be a list of at least one audience (the aud a token must carry)',
  ]);
  t.match(problemsOf(withKeys({ machineClients: { issuers: [{ issuer: 'https://i.example.com' }] } })), ['machineClients.issuers[0].audiences: required']);
  t.match(problemsOf(withKeys({ machineClients: { cacheTtl: 'soon' } })), [/^machineClients\.cacheTtl: must be a duration/]);
});

t.test('machine clients configured while no route accepts bearer: a warning', async (t) => {
  const config = loadConfig({ ...withKeys({ machineClients: { issuers: [K8S] } }), routes: [{ path: '/api', upstream: 'http://api' }] }, {});
  t.match(configWarnings(config), [/^machineClients: no route has accept: \[bearer\]/]);
});
