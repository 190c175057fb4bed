import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "Routes" and "Configuration": what `check` refuses in `routes`, every problem at once; provider.clientId has no default. */

const withRoutes = (routes: unknown[]) => ({ ...withKeys({}), routes });

t.test('provider.clientId is required: no default hides a missing client id', async (t) => {
  const document = withKeys({});
  delete (document.provider as Record<string, unknown>).clientId;
  t.strictSame(problemsOf(document), ['provider.clientId: required']);
});

t.test('a valid route list loads with its defaults', async (t) => {
  const config = loadConfig(withRoutes([{ path: '/api', upstream: 'http://api:8080/v1' }, { path: '/', upstream: 'http://web:3000', auth: 'public' }]), {});
  t.match(config.routes![0], { path: '/api', stripPrefix: false, auth: 'required', onUnauthenticated: 'auto', headers: {}, websocket: false, timeout: 30 });
  t.equal(config.routes![0]!.token, undefined, 'token defaults by auth when the route is compiled');
});

t.test('every route problem is reported at once, each under its key', async (t) => {
  const problems = problemsOf(
    withRoutes([
      { path: '/api', upstream: 'http://api:8080' },
      { path: '/api/', upstream: 'http://api:8081' },
      { path: '/login', upstream: 'http://web:3000' },
      { path: '/session/x', upstream: 'http://web:3000' },
      { path: '/files', upstream: 'ftp://files.example.com' },
      { path: '/assets', upstream: 'http://web:3000', auth: 'public', token: 'access' },
      { path: '/open', upstream: 'http://web:3000', auth: 'optional', allow: { emailDomains: ['example.com'] } },
      { path: '/a/../b', upstream: 'http://web:3000' },
      { path: '/h', upstream: 'http://web:3000', headers: { Authorization: 'sub' } },
      { path: '/q', upstream: 'http://web:3000/?x=1' },
      { path: '/m', upstream: 'http://web:3000', allow: { emailDomains: ['example.com', '@example.com', '*.example.com'] } },
    ]),
  );
  t.strictSame(problems.sort(), [
    'routes[1].path: same path as routes[0] (/api)',
    "routes[2].path: /login is the gateway's own paths.login (/login) or lies under it; gateway paths come before every route",
    "routes[3].path: /session/x is the gateway's own paths.session (/session) or lies under it; gateway paths come before every route",
    'routes[4].upstream: must be an absolute http(s) URL such as http://orders:8080 or http://orders:8080/v1',
    'routes[5].token: access is not allowed on a public route (it reads no session); use auth: optional to send a token when signed in',
    'routes[6].allow: only on a route with auth: required (it has auth: optional)',
    'routes[7].path: must be an absolute path such as /api/orders (no //, . or .. segments, query or fragment)',
    'routes[8].headers.Authorization: the gateway sets this header itself; name another (e.g. X-Forwarded-User)',
    'routes[9].upstream: must not contain a query, fragment or credentials',
    'routes[10].allow.emailDomains[1]: must be a domain such as example.com (no @, scheme, wildcard or port), got "@example.com"',
    'routes[10].allow.emailDomains[2]: must be a domain such as example.com (no @, scheme, wildcard or port), got "*.example.com"',
  ].sort());
});

t.test('schema problems in routes name the route and key', async (t) => {
  t.strictSame(problemsOf(withRoutes([{ path: '/api', upstream: 'http://api', allow: { emailDomains: ['example.com'], allowUnverifiedEmail: 'yes' } }])), [
    'routes[0].allow.allowUnverifiedEmail: must be true or false',
  ]);
  t.strictSame(problemsOf(withRoutes([{ path: 'api', upstream: 'http://api' }])), ['routes[0].path: must be an absolute path such as /api/orders']);
  t.strictSame(problemsOf(withRoutes([{ path: '/api', upstream: 'http://api', auth: 'maybe' }])), ['routes[0].auth: must be one of: required, optional, public']);
  t.match(problemsOf(withRoutes([{ path: '/api' }])), ['routes[0].upstream: required']);
  t.match(problemsOf(withRoutes([{ path: '/api', upstream: 'http://api', timeout: '5 m' }])), [/^routes\[0\]\.timeout: must be a duration/]);
  t.match(problemsOf(withRoutes([{ path: '/api', upstream: 'http://api', upstreem: 'x' }])), [/^routes\[0\]\.upstreem: unknown key/]);
  t.strictSame(problemsOf(withRoutes([])), ['routes: must be a list of routes, each with path and upstream']);
});

t.test('without routes, upstream is checked as before; with routes it is not used', async (t) => {
  t.strictSame(problemsOf(withKeys({ upstream: 'ftp://x' })), ['upstream: must be an absolute http(s) URL such as http://127.0.0.1:3000']);
  t.ok(loadConfig({ ...withKeys({ upstream: 'ftp://x' }), routes: [{ path: '/', upstream: 'http://web:3000' }] }, {}));
});
