import t from 'tap';
import { safeReturnTo } from '../../src/oauth/return-to.js';

/**
 * README "What the browser sees", GET /login: returnTo must start with exactly one `/` (not `//` or
 * `/\`) and contain no backslash or control character, raw or
 * percent-encoded; anything else becomes `/`. The values below are what the
 * route receives after the query string is decoded once.
 */
const REFUSED: Array<[string, unknown]> = [
  ['absolute https URL', 'https://evil.example/account'],
  ['absolute http URL', 'http://evil.example'],
  ['scheme-relative URL', '//evil.example/path'],
  ['three slashes', '///evil.example'],
  ['slash backslash', '/\\evil.example'],
  ['backslash backslash', '\\\\evil.example'],
  ['backslash later in the path', '/a\\b'],
  ['encoded second slash', '/%2F/evil.example'],
  ['encoded slashes, lower case', '/%2f%2fevil.example'],
  ['encoded backslash', '/%5Cevil.example'],
  ['encoded backslash, lower case', '/%5cevil.example'],
  ['encoded backslash later in the path', '/path/%5C/x'],
  ['encoded tab', '/path%09x'],
  ['encoded CR LF (header injection)', '/path%0d%0aSet-Cookie:%20a=b'],
  ['encoded NUL', '/a%00b'],
  ['encoded DEL', '/a%7Fb'],
  ['encoded C1 control (U+0085)', '/a%C2%85b'],
  ['raw tab', '/path\tx'],
  ['raw CR LF', '/a\r\nLocation: https://evil.example'],
  ['raw DEL', '/a\x7fb'],
  ['raw C1 control', '/a\u0085b'],
  ['javascript: URL', 'javascript:alert(1)'],
  ['data: URL', 'data:text/html,<script>alert(1)</script>'],
  ['relative path without a leading slash', 'orders/7'],
  ['encoded leading slashes', '%2F%2Fevil.example'],
  ['double-encoded slashes', '/%252F%252Fevil.example'],
  ['double-encoded backslash', '/%255Cevil.example'],
  ['triple-encoded CR', '/a%25250db'],
  ['more layers of encoding than honest links carry', '/a%2525252Fb'],
  ['malformed percent-encoding', '/100%'],
  ['empty string', ''],
  ['absent', undefined],
  ['null', null],
  ['a number', 42],
  ['repeated parameter (array)', ['/a', '/b']],
  ['an object (returnTo[x]=)', { x: '/a' }],
  ['very long', `/${'a'.repeat(5000)}`],
  ['lone surrogate', '/a\ud800b'],
  ['whitespace before the slash', ' /path'],
];

const KEPT: Array<[string, string, string]> = [
  ['the root', '/', '/'],
  ['a path', '/orders', '/orders'],
  ['a path with a query', '/orders?id=7&sort=desc', '/orders?id=7&sort=desc'],
  ['a path with a query and fragment', '/a/b?x=1#section-2', '/a/b?x=1#section-2'],
  ['a query holding a URL', '/go?next=https://example.com/', '/go?next=https://example.com/'],
  ['an encoded space stays encoded', '/a%20b', '/a%20b'],
  ['an encoded slash later in the path', '/files/a%2Fb', '/files/a%2Fb'],
  ['a raw space is encoded', '/a b', '/a%20b'],
  ['unicode is encoded as UTF-8', '/café/日本', '/caf%C3%A9/%E6%97%A5%E6%9C%AC'],
  ['already encoded unicode', '/caf%C3%A9', '/caf%C3%A9'],
  ['a colon in a later segment', '/javascript:alert(1)', '/javascript:alert(1)'],
  ['dot segments', '/../..//x', '/../..//x'],
  ['the longest accepted', `/${'a'.repeat(2047)}`, `/${'a'.repeat(2047)}`],
];

t.test('values that could leave the site, or are not one clean string, become /', async (t) => {
  for (const [name, value] of REFUSED) t.equal(safeReturnTo(value), '/', name);
});

t.test('local paths are kept, spaces and non-ASCII percent-encoded', async (t) => {
  for (const [name, value, expected] of KEPT) t.equal(safeReturnTo(value), expected, name);
});

t.test('every result is printable ASCII and resolves on the same origin', async (t) => {
  t.ok(REFUSED.length + KEPT.length >= 25, 'the table covers at least 25 variants');
  const base = 'https://app.example.com/some/page';
  for (const [name, value] of [...REFUSED, ...KEPT].map(([name, value]) => [name, value] as const)) {
    const result = safeReturnTo(value);
    t.match(result, /^\/[\x21-\x7e]*$/, `${name}: printable ASCII starting with /`);
    t.equal(new URL(result, base).origin, 'https://app.example.com', `${name}: stays on the origin`);
  }
});

t.test('an encoded result longer than the limit becomes /', async (t) => {
  t.equal(safeReturnTo(`/${'é'.repeat(1000)}`), '/', '1000 characters, 6000 once encoded');
  t.equal(safeReturnTo(`/${'é'.repeat(300)}`), `/${'%C3%A9'.repeat(300)}`);
});
