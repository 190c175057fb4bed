import t from 'tap';
import { normalPath, pathAfterSegments } from '../../src/http/request-path.js';

/** README "Routes", the path rule: src/http/request-path.ts on its own (the three ways in are test/access/one-gate.test.ts). */

t.test('a plain path is normal as it is', async (t) => {
  for (const path of ['/', '/api', '/api/orders/7', '/a-b_c~d.e', '/a/...', '/a/b.', "/a/!$&'()*+,=:@"]) {
    t.strictSame(normalPath(path), { ok: true, path, match: path }, path);
  }
});

t.test('unreserved characters are decoded, other escapes kept in upper case', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['/%61dmin', '/admin', '/admin'],
    ['/%41%42%2d%2E%5f%7e', '/AB-._~', '/AB-._~'],
    ['/a%20b', '/a%20b', '/a%20b'],
    ['/a%3fb%23c', '/a%3Fb%23c', '/a%3Fb%23c'],
    ['/caf%C3%A9', '/caf%C3%A9', '/caf%C3%A9'],
    ['/100%25', '/100%25', '/100%25'],
    ['/.well-known/x', '/.well-known/x', '/.well-known/x'],
  ];
  for (const [raw, path, match] of cases) t.strictSame(normalPath(raw), { ok: true, path, match }, raw);
});

t.test('";" parameters and empty segments are ignored for matching, kept for the upstream', async (t) => {
  const cases: Array<[string, string]> = [
    ['/admin;x=1/panel', '/admin/panel'],
    ['/admin;jsessionid=A1', '/admin'],
    ['/;x/admin', '/admin'],
    ['//admin//panel/', '/admin/panel/'],
    ['/api/', '/api/'],
    ['/;x', '/'],
  ];
  for (const [raw, match] of cases) t.strictSame(normalPath(raw), { ok: true, path: raw, match }, raw);
});

t.test('refused: what an upstream could read as another path', async (t) => {
  const refused = [
    '/a%2Fb', '/a%2fb', '/a%252Fb', '/a%25252fb', '/a%5Cb', '/a%5cb', '/a%255Cb', '/a\\b',
    '/a/../b', '/a/./b', '/..', '/.', '/a/%2e%2e/b', '/a/.%2E/b', '/a/%2E', '/a/..;x/b', '/a/%252e%252e/b', '/a/%2e%2e%2fb',
    '/a%', '/a%2', '/a%zz', '/a%G0',
    '/a%C0%AF', '/a%FF', '/a%E2%82',
    '/a b', '/a\tb', '/a\u00e9', '/a\u0000',
    'a/b', '*', 'http://evil.example/a', '',
  ];
  for (const raw of refused) {
    const result = normalPath(raw);
    t.equal(result.ok, false, JSON.stringify(raw));
    if (!result.ok && raw.length > 3) t.notOk(result.reason.includes(raw.slice(1)), 'the reason does not echo the path');
  }
});

t.test('stripPrefix counts segments as the match does', async (t) => {
  t.equal(pathAfterSegments('/api;v=2/orders/7', 1), '/orders/7');
  t.equal(pathAfterSegments('//api//orders/7', 2), '/7');
  t.equal(pathAfterSegments('/;x/api/orders', 1), '/orders');
  t.equal(pathAfterSegments('/api', 1), '/');
  t.equal(pathAfterSegments('/api/', 1), '/');
});
