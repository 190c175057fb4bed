import t from 'tap';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/load.js';
import { sqlitePath } from '../../src/session/backends/sqlite.js';
import { KEY, problemsOf, withKeys } from './config-helpers.js';

/** README "Configuration" and "Storage": encryption keys, cookie attributes that browsers would refuse, store URLs. */

const keyOf = (bytes: number) => randomBytes(bytes).toString('base64');

t.test('every encryption key must be base64 of 32 bytes; the error names its position', async (t) => {
  const config = loadConfig(withKeys({ session: { encryptionKeys: [KEY, randomBytes(32).toString('base64url')] } }), {});
  t.equal(config.session.encryptionKeys.length, 2, 'standard and url-safe base64 are both read');
  t.strictSame(problemsOf(withKeys({ session: { encryptionKeys: [KEY, keyOf(16), 'not base64!', keyOf(33)] } })), [
    'session.encryptionKeys[1]: must be base64 of exactly 32 bytes, got 16 (generate one with: openssl rand -base64 32)',
    'session.encryptionKeys[2]: must be base64 of exactly 32 bytes, got invalid base64 (generate one with: openssl rand -base64 32)',
    'session.encryptionKeys[3]: must be base64 of exactly 32 bytes, got 33 (generate one with: openssl rand -base64 32)',
  ]);
});

t.test('SameSite=None without Secure is refused; with Secure it is accepted', async (t) => {
  const message = 'session.cookieSameSite: none requires a Secure cookie (an https publicUrl or session.cookieSecure: true)';
  t.strictSame(problemsOf(withKeys({ server: { publicUrl: 'http://127.0.0.1:8080' }, session: { cookieSameSite: 'none' } })), [message], 'auto on http');
  t.strictSame(problemsOf(withKeys({ session: { cookieSameSite: 'none', cookieSecure: false } })), [message], 'explicitly not Secure');
  t.equal(loadConfig(withKeys({ session: { cookieSameSite: 'none' } }), {}).session.cookieSameSite, 'none', 'auto on https');
  const forced = loadConfig(withKeys({ server: { publicUrl: 'http://127.0.0.1:8080' }, session: { cookieSameSite: 'none', cookieSecure: true } }), {});
  t.equal(forced.session.cookieSecure, true, 'Secure forced on an http publicUrl');
});

t.test('a __Host- or __Secure- cookie name without Secure is refused', async (t) => {
  for (const prefix of ['__Host-', '__Secure-']) {
    t.strictSame(problemsOf(withKeys({ server: { publicUrl: 'http://127.0.0.1:8080' }, session: { cookieName: `${prefix}session_id` } })), [
      `session.cookieName: a ${prefix} cookie must be Secure (an https publicUrl or session.cookieSecure: true)`,
    ]);
    t.equal(loadConfig(withKeys({ session: { cookieName: `${prefix}session_id` } }), {}).session.cookieName, `${prefix}session_id`);
  }
  t.strictSame(problemsOf(withKeys({ session: { cookieName: 'session id;' } })), ["session.cookieName: must be a cookie name (letters, digits and !#$%&'*+-.^_`|~)"]);
});

t.test('store URLs: memory, sqlite, redis and rediss, Sentinel and Cluster; anything else is refused', async (t) => {
  for (const store of [
    'memory://',
    'sqlite://./data/gatehouse.sqlite',
    'sqlite:///var/lib/gatehouse/db.sqlite',
    'redis://cache:6379/0',
    'redis://cache',
    'redis://:pw@cache:6379/1',
    'rediss://user:pw@cache.example.com:6380/0',
    'redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster',
    'redis+sentinel://:pw@s1:26379,[::1]:26380/mymaster/2',
    'rediss+sentinel://user:pw@s1.example.com:26379/mymaster',
    'redis+cluster://n1:6379,n2:6379,n3:6379',
    'rediss+cluster://user:pw@n1.example.com:6380',
  ]) {
    t.equal(loadConfig(withKeys({ session: { store } }), {}).session.store, store, store);
  }
  for (const store of ['postgres://db/sessions', './data/gatehouse.sqlite', 'file:///tmp/x', 'memcached://cache:11211', 'redis+replica://cache:6379']) {
    t.strictSame(problemsOf(withKeys({ session: { store } })), ['session.store: must be memory://, sqlite://PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER[/DB] or redis+cluster://HOST:PORT[,HOST:PORT…] (rediss+ for TLS)'], store);
  }
  const refused: Array<[string, string]> = [
    ['redis://a:6379,b:6379/0', 'redis:// names one server; use redis+sentinel:// or redis+cluster:// for several'],
    ['redis+sentinel://s1:26379,s2:26379', "redis+sentinel:// needs the master's name: redis+sentinel://HOST:PORT,HOST:PORT/MASTER[/DB]"],
    ['redis+sentinel://s1:26379/mymaster/x', 'the database must be a number'],
    ['redis+cluster://n1:6379/0', 'redis+cluster:// takes no path: a Cluster has database 0 only'],
    ['redis+cluster://n1:6379,,n2:6379', 'every node must be HOST:PORT'],
    ['redis+cluster://n1:99999', 'a port must be 1-65535'],
    ['redis://cache:6379/0?timeout=1', 'must not have a query or fragment'],
  ];
  for (const [store, problem] of refused) t.strictSame(problemsOf(withKeys({ session: { store } })), [`session.store: ${problem}`], store);
});

t.test('a sqlite:// path is relative to the working directory; sqlite:/// is absolute', async (t) => {
  t.equal(sqlitePath('sqlite://./data/gatehouse.sqlite', '/srv/gatehouse'), '/srv/gatehouse/data/gatehouse.sqlite');
  t.equal(sqlitePath('sqlite://data/gatehouse.sqlite', '/srv/gatehouse'), '/srv/gatehouse/data/gatehouse.sqlite');
  t.equal(sqlitePath('sqlite://../shared/g.sqlite', '/srv/gatehouse'), '/srv/shared/g.sqlite');
  t.equal(sqlitePath('sqlite:///var/lib/gatehouse/db.sqlite', '/srv/gatehouse'), '/var/lib/gatehouse/db.sqlite');
  t.equal(sqlitePath('sqlite:///var/lib/my%20data/db.sqlite', '/srv/gatehouse'), '/var/lib/my data/db.sqlite');
});

t.test('gateway paths must be distinct absolute paths other than /', async (t) => {
  t.strictSame(problemsOf(withKeys({ paths: { login: 'login', logout: '/', session: '/auth//session' } })), [
    'paths.login: must be an absolute path such as /login, not / itself',
    'paths.logout: must be an absolute path such as /logout, not / itself',
    'paths.session: must be an absolute path such as /session, not / itself',
  ]);
  const duplicate = problemsOf(withKeys({ paths: { logout: '/login' } }));
  t.equal(duplicate.length, 1);
  t.match(duplicate[0], /^paths\.(login: same path as paths\.logout|logout: same path as paths\.login)$/, 'both keys named');
});
