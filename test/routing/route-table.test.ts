import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { compileRoutes, upstreamPath } from '../../src/routing/route-table.js';
import { isAmbiguousPath } from '../../src/config/route-paths.js';
import { compileAllow, isAllowed } from '../../src/routing/allow.js';
import { identityHeaders } from '../../src/routing/identity-headers.js';
import { withKeys } from '../config/config-helpers.js';

/** README "Routes": longest prefix on segment boundaries, stripPrefix with a base path, token and auth defaults, allow, identity headers. */

const tableOf = (routes: unknown[]) => compileRoutes(loadConfig({ ...withKeys({}), routes }, {}));

t.test('the longest prefix wins, on path-segment boundaries only', async (t) => {
  const table = tableOf([
    { path: '/', upstream: 'http://web:3000', auth: 'optional' },
    { path: '/api', upstream: 'http://api:8080' },
    { path: '/api/orders', upstream: 'http://orders:8080/v1', stripPrefix: true },
    { path: '/assets/', upstream: 'http://cdn:3000', auth: 'public' },
  ]);
  const cases: Array<[string, string | undefined]> = [
    ['/api/orders', '/api/orders'],
    ['/api/orders/7', '/api/orders'],
    ['/api/ordersx', '/api'],
    ['/api', '/api'],
    ['/apix', '/'],
    ['/assets', '/assets'],
    ['/assets/app.js', '/assets'],
    ['/', '/'],
    ['/anything/else', '/'],
  ];
  for (const [path, expected] of cases) t.equal(table.match(path)?.path, expected, path);
  t.equal(tableOf([{ path: '/api', upstream: 'http://api' }]).match('/other'), undefined, 'no route: undefined (404)');
});

t.test('stripPrefix and the upstream base path', async (t) => {
  const [orders, kept, root] = ['/api/orders', '/keep', '/'].map(
    (path) =>
      tableOf([
        { path: '/api/orders', upstream: 'http://orders:8080/v1/', stripPrefix: true },
        { path: '/keep', upstream: 'http://k:1/base' },
        { path: '/', upstream: 'http://web:3000' },
      ]).match(path)!,
  );
  t.equal(upstreamPath(orders!, '/api/orders/7?x=1'), '/v1/7?x=1');
  t.equal(upstreamPath(orders!, '/api/orders'), '/v1/');
  t.equal(upstreamPath(orders!, '/api/orders?x=1'), '/v1/?x=1');
  t.equal(upstreamPath(kept!, '/keep/a'), '/base/keep/a');
  t.equal(upstreamPath(root!, '/x?y'), '/x?y');
  t.equal(orders!.origin, 'http://orders:8080');
});

t.test('token defaults to access, and to none on public routes; the one-route form is required and labelled proxy', async (t) => {
  const table = tableOf([
    { path: '/p', upstream: 'http://a', auth: 'public' },
    { path: '/o', upstream: 'http://a', auth: 'optional' },
    { path: '/n', upstream: 'http://a', token: 'none' },
  ]);
  t.strictSame(
    table.routes.map((route) => [route.path, route.sendsToken, route.label]),
    [
      ['/p', false, '/p'],
      ['/o', true, '/o'],
      ['/n', false, '/n'],
    ],
  );
  const one = compileRoutes(loadConfig(withKeys({ upstream: 'http://127.0.0.1:3000' }), {}));
  t.match(one.routes, [{ path: '/', label: 'proxy', auth: 'required', sendsToken: true, origin: 'http://127.0.0.1:3000', basePath: '' }]);
});

t.test('every header any route names is collected, lower case, for removal from every request', async (t) => {
  const table = tableOf([
    { path: '/a', upstream: 'http://a', headers: { 'X-Forwarded-User': 'sub' } },
    { path: '/b', upstream: 'http://b', auth: 'public', headers: { 'X-Email': 'email' } },
  ]);
  t.strictSame([...table.identityHeaderNames].sort(), ['x-email', 'x-forwarded-user', 'x-gatehouse-assertion'], 'and the assertion header, on every route (README "Identity assertion")');
});

t.test('dot segments, raw or encoded, and backslashes make a path ambiguous', async (t) => {
  for (const path of ['/a/../b', '/a/./b', '/..', '/a/%2e%2e/b', '/a/.%2E/b', '/a/%2E', '/a\\b', '/a%5cb']) t.ok(isAmbiguousPath(path), path);
  for (const path of ['/a/...', '/a/.well-known/x', '/a/b.c', '/', '/a%2fb']) t.notOk(isAmbiguousPath(path), path);
});

t.test('allow: email domains (verified), claim values, array claims match on any element', async (t) => {
  const byDomain = compileAllow({ emailDomains: ['Example.com'] });
  t.notOk(isAllowed(byDomain, { email: 'alice@EXAMPLE.com' }), 'no email_verified: refused unless allowUnverifiedEmail');
  t.ok(isAllowed(byDomain, { email: 'alice@EXAMPLE.com', email_verified: true }));
  t.ok(isAllowed(byDomain, { email: 'alice@example.com', email_verified: 'true' }), 'the string "true" is true');
  t.notOk(isAllowed(byDomain, { email: 'alice@example.com', email_verified: 'false' }), 'the string "false" is not');
  t.notOk(isAllowed(byDomain, { email: 'alice@example.com', email_verified: 1 }), 'nor is any other value');
  t.notOk(isAllowed(byDomain, { email: 'm@evil.example@example.com', email_verified: true }), 'exactly one @');
  t.notOk(isAllowed(byDomain, { email: '@example.com', email_verified: true }), 'a local part before the @');
  const lenient = compileAllow({ emailDomains: ['example.com'], allowUnverifiedEmail: true });
  t.ok(isAllowed(lenient, { email: 'alice@example.com' }), 'allowUnverifiedEmail: a missing email_verified passes');
  t.notOk(isAllowed(lenient, { email: 'alice@example.com', email_verified: false }), 'an explicit false never does');
  t.notOk(isAllowed(lenient, { email: 'alice@example.com', email_verified: 'false' }));
  t.notOk(isAllowed(lenient, { email: 'm@evil.example@example.com' }));
  t.notOk(isAllowed(byDomain, { email: 'alice@example.com', email_verified: false }), 'an unverified email never matches');
  t.notOk(isAllowed(byDomain, { email: 'alice@example.com.evil.org' }));
  t.notOk(isAllowed(byDomain, { email: 'alice@sub.example.com' }));
  t.notOk(isAllowed(byDomain, {}));
  const byGroup = compileAllow({ claims: { groups: ['payments', 'admins'], tier: [2] } });
  t.ok(isAllowed(byGroup, { groups: ['staff', 'admins'], tier: 2 }));
  t.notOk(isAllowed(byGroup, { groups: ['staff'], tier: 2 }));
  t.notOk(isAllowed(byGroup, { groups: 'admins,staff', tier: 2 }), 'a string is compared whole');
  t.notOk(isAllowed(byGroup, { groups: ['admins'] }), 'every listed claim must match');
  const both = compileAllow({ emailDomains: ['example.com'], claims: { groups: ['admins'] } });
  t.notOk(isAllowed(both, { email: 'a@example.com', email_verified: true, groups: ['staff'] }));
  t.ok(isAllowed(both, { email: 'a@example.com', email_verified: true, groups: ['admins'] }));
});

t.test('identity headers: strings and numbers only, never a value a header cannot hold', async (t) => {
  const [route] = tableOf([
    { path: '/', upstream: 'http://a', headers: { 'X-User': 'sub', 'X-Email': 'email', 'X-Age': 'age', 'X-Groups': 'groups', 'X-Name': 'name', 'X-None': 'missing' } },
  ]).routes;
  t.strictSame(identityHeaders(route!, { sub: 'alice', email: 'a@example.com', age: 42, groups: ['a'], name: 'Eve\r\nX-Admin: 1' }), {
    'x-user': 'alice',
    'x-email': 'a@example.com',
    'x-age': '42',
  });
  t.strictSame(identityHeaders(route!, { sub: ' padded', email: 'é@example.com', age: Number.NaN, name: 'tab\tinside' }), { 'x-name': 'tab\tinside' });
});
