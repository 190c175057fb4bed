import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { compileRoutes } from '../../src/routing/route-table.js';
import { signInAsks } from '../../src/config/token-targets.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "A token for each API": what `check` refuses in a route's `token` object, every problem at once. */

const withRoutes = (routes: unknown[], provider: Record<string, unknown> = {}) => ({ ...withKeys({ provider: { ...provider } }), routes });

t.test('token objects load; equal objects are one target, named by name, resource, audience or scopes', async (t) => {
  const config = loadConfig(
    withRoutes([
      { path: '/orders', upstream: 'http://orders:8080', token: { resource: 'https://orders.example.com', scopes: ['orders.read'] } },
      { path: '/orders2', upstream: 'http://orders:8080', token: { scopes: ['orders.read'], resource: 'https://orders.example.com' } },
      { path: '/ledger', upstream: 'http://ledger:8080', auth: 'optional', token: { exchange: { audience: 'ledger', scopes: ['ledger.read'] } } },
      { path: '/notes', upstream: 'http://notes:8080', token: { scopes: ['notes.write', 'notes.read'] } },
      { path: '/named', upstream: 'http://named:8080', token: { name: 'billing', exchange: { resource: 'https://billing.example.com', subjectToken: 'id' } } },
      { path: '/', upstream: 'http://web:3000', token: 'access' },
    ]),
    {},
  );
  t.same(config.routes![2]!.token, { exchange: { audience: 'ledger', scopes: ['ledger.read'], subjectToken: 'access' } }, 'subjectToken defaults to access');
  const table = compileRoutes(config);
  t.same(
    table.targets.map((target) => [target.label, target.kind]),
    [
      ['https://orders.example.com', 'refresh'],
      ['ledger', 'exchange'],
      ['notes.read notes.write', 'refresh'],
      ['billing', 'exchange'],
    ],
  );
  const byPath = (path: string) => table.routes.find((route) => route.path === path)!;
  t.equal(byPath('/orders').target, byPath('/orders2').target, 'the same grant is one target');
  t.ok(byPath('/orders').sendsToken);
  t.equal(byPath('/').target, undefined, 'token: access sends the sign-in token');
  t.same(signInAsks(config.provider.scopes, table.targets), {
    scope: 'openid profile email offline_access orders.read ledger.read notes.read notes.write',
    resources: ['https://orders.example.com', 'https://billing.example.com'],
  });
});

t.test('every token target problem is reported at once, each under its key', async (t) => {
  const problems = problemsOf(
    withRoutes([
      { path: '/a', upstream: 'http://a:8080', token: { exchange: { scopes: ['x'] } } },
      { path: '/b', upstream: 'http://b:8080', auth: 'public', token: { resource: 'https://b.example.com' } },
      { path: '/c', upstream: 'http://c:8080', token: { resource: 'orders' } },
      { path: '/d', upstream: 'http://d:8080', token: { resource: 'https://d.example.com/#frag' } },
      { path: '/e', upstream: 'http://e:8080', token: { exchange: { audience: 'e', resource: 'not a uri' } } },
      { path: '/f', upstream: 'http://f:8080', token: {} },
      { path: '/g', upstream: 'http://g:8080', token: { resource: 'https://g.example.com', exchange: { audience: 'g' } } },
      { path: '/h', upstream: 'http://h:8080', token: { name: 'sign-in', scopes: ['h'] } },
      { path: '/i', upstream: 'http://i:8080', token: { name: 'same', scopes: ['i'] } },
      { path: '/j', upstream: 'http://j:8080', token: { name: 'same', scopes: ['j'] } },
    ]),
  );
  t.strictSame(problems.sort(), [
    'routes[0].token.exchange: needs audience and/or resource (RFC 8693 §2.1: whom the exchanged token is for)',
    'routes[1].token: a token target is not allowed on a public route (it reads no session); use auth: optional to send one when signed in',
    'routes[2].token.resource: must be an absolute URI such as https://orders.example.com (RFC 8707)',
    'routes[3].token.resource: must not contain a fragment (RFC 8707 §2)',
    'routes[4].token.exchange.resource: must be an absolute URI such as https://orders.example.com (RFC 8707)',
    'routes[5].token: needs resource and/or scopes, or exchange',
    'routes[6].token: exchange cannot be combined with resource or scopes beside it; put them inside exchange',
    'routes[7].token.name: sign-in names the sign-in tokens in the metrics; choose another name',
    'routes[9].token: another token target is also called same (in gatehouse_token_refreshes_total); give one a distinct name',
  ]);
});

t.test('an ID token as subject needs an OpenID provider; unknown keys and wrong types are refused', async (t) => {
  const idExchange = { path: '/x', upstream: 'http://x:8080', token: { exchange: { audience: 'x', subjectToken: 'id' } } };
  t.strictSame(problemsOf(withRoutes([idExchange], { scopes: ['profile', 'offline_access'] })), [
    'routes[0].token.exchange.subjectToken: id needs an OpenID provider (provider.issuer and the openid scope) to issue ID tokens',
  ]);
  t.strictSame(problemsOf(withRoutes([{ path: '/x', upstream: 'http://x:8080', token: { resource: 'https://x.example.com', audiance: 'x' } }])), [
    'routes[0].token: must be access, none, or a token target (resource and/or scopes, or exchange)',
  ]);
  t.strictSame(problemsOf(withRoutes([{ path: '/x', upstream: 'http://x:8080', token: 'bearer' }])), [
    'routes[0].token: must be access, none, or a token target (resource and/or scopes, or exchange)',
  ]);
});
