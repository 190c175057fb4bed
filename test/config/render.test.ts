import t from 'tap';
import { randomBytes } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { renderConfig } from '../../src/config/render.js';
import { KEY, withKeys } from './config-helpers.js';

/** README "Run it": `check` prints the effective config as YAML with every secret shown as `[redacted]`. */

const secret = randomBytes(24).toString('base64url');
const oldKey = randomBytes(32).toString('base64');
const pem = `-----BEGIN PRIVATE KEY-----\n${randomBytes(48).toString('base64')}\n-----END PRIVATE KEY-----`;

t.test('client secret, private key, every encryption key and a redis password are redacted', async (t) => {
  const config = loadConfig(
    withKeys({
      provider: { clientSecret: secret, privateKey: pem, privateKeyId: 'k1' },
      session: { encryptionKeys: [KEY, oldKey], store: 'rediss://gatehouse:p%40ss-w0rd@cache.example.com:6380/2' },
    }),
    {},
  );
  const text = renderConfig(config);
  for (const value of [secret, KEY, oldKey, 'p%40ss-w0rd', 'p@ss-w0rd', 'PRIVATE KEY']) t.notOk(text.includes(value), `${value.slice(0, 12)}... is not printed`);
  const printed = parseYaml(text) as Record<string, Record<string, unknown>>;
  t.equal(printed.provider!.clientSecret, '[redacted]');
  t.equal(printed.provider!.privateKey, '[redacted]');
  t.equal(printed.provider!.privateKeyId, 'k1', 'a key id is not a secret');
  t.strictSame(printed.session!.encryptionKeys, ['[redacted]', '[redacted]'], 'one entry per key, so the count stays visible');
  t.equal(printed.session!.store, 'rediss://gatehouse:[redacted]@cache.example.com:6380/2');
});

t.test('a store URL with a password only, or without one, is printed accordingly', async (t) => {
  const passwordOnly = renderConfig(loadConfig(withKeys({ session: { store: 'redis://:hunter2hunter2@127.0.0.1:6379/0' } }), {}));
  t.equal((parseYaml(passwordOnly) as { session: { store: string } }).session.store, 'redis://:[redacted]@127.0.0.1:6379/0');
  const sentinel = renderConfig(loadConfig(withKeys({ session: { store: 'rediss+sentinel://gh:s3cr%40t@s1:26379,s2:26379/mymaster/1' } }), {}));
  t.equal((parseYaml(sentinel) as { session: { store: string } }).session.store, 'rediss+sentinel://gh:[redacted]@s1:26379,s2:26379/mymaster/1', 'Sentinel: several hosts');
  t.notOk(sentinel.includes('s3cr'));
  const rawAt = renderConfig(loadConfig(withKeys({ session: { store: 'redis://gh:p@ss:w@rd@127.0.0.1:6379/0' } }), {}));
  t.equal((parseYaml(rawAt) as { session: { store: string } }).session.store, 'redis://gh:[redacted]@127.0.0.1:6379/0', 'a raw @ and : in the password: hidden whole');
  t.notOk(rawAt.includes('ss:w') || rawAt.includes('rd@'), 'no part of it printed');
  const cluster = renderConfig(loadConfig(withKeys({ session: { store: 'redis+cluster://:hunter2hunter2@n1:6379,n2:6379' } }), {}));
  t.equal((parseYaml(cluster) as { session: { store: string } }).session.store, 'redis+cluster://:[redacted]@n1:6379,n2:6379', 'Cluster');
  const none = renderConfig(loadConfig(withKeys({ session: { store: 'redis://127.0.0.1:6379/0' } }), {}));
  t.equal((parseYaml(none) as { session: { store: string } }).session.store, 'redis://127.0.0.1:6379/0');
});

t.test('the printed config is the effective one: defaults included, durations with units, sections in documented order', async (t) => {
  const printed = parseYaml(renderConfig(loadConfig(withKeys({ tokens: { refreshSkew: 90 }, session: { ttl: '7d' } }), {}))) as Record<string, Record<string, unknown>>;
  t.strictSame(Object.keys(printed), ['server', 'admin', 'provider', 'upstream', 'session', 'tokens', 'paths', 'forwardAuth', 'csrf', 'pages', 'limits', 'machineClients', 'rateLimit', 'assertion', 'securityEvents']);
  t.strictSame(Object.keys(printed.server!), ['host', 'port', 'publicUrl', 'trustProxy', 'shutdownGrace', 'idleTimeout', 'maxHeaderSize']);
  t.equal(printed.server!.idleTimeout, '1m', 'server.idleTimeout defaults to 60 s');
  t.equal(printed.tokens!.refreshSkew, '90s');
  t.equal(printed.tokens!.defaultLifetime, '5m');
  t.equal(printed.session!.ttl, '7d');
  t.equal(printed.session!.cookieMaxAge, '1d');
  t.equal(printed.server!.port, 8080);
  t.strictSame(printed.limits, { perUserConcurrency: 64, websocketMessageBytes: 16777216, upstreamConnections: 0 }, 'limits.websocketMessageBytes and limits.upstreamConnections shown with their defaults');
});

t.test('the printed config, secrets put back, loads to the same config', async (t) => {
  const config = loadConfig(withKeys({ provider: { clientSecret: secret }, session: { encryptionKeys: [KEY] }, tokens: { refreshSkew: 45 } }), {});
  const printed = parseYaml(renderConfig(config)) as Record<string, Record<string, unknown>>;
  printed.provider!.clientSecret = secret;
  printed.session!.encryptionKeys = [KEY];
  t.strictSame(loadConfig(printed, {}), config);
});

t.test('credentials inside the upstream and store URLs are redacted, wherever a URL holds them', async (t) => {
  const config = loadConfig(
    withKeys({
      upstream: 'https://svc-user:upstream-pa55@api.internal:8443/v1?api_key=k3y-value&x=1',
      session: { store: 'rediss://:only-password-1@cache.example.com:6380/0' },
    }),
    {},
  );
  const text = renderConfig(config);
  for (const value of ['upstream-pa55', 'k3y-value', 'only-password-1']) t.notOk(text.includes(value), `${value} is not printed`);
  const printed = parseYaml(text) as Record<string, unknown> & { session: { store: string } };
  t.equal(printed.upstream, 'https://svc-user:[redacted]@api.internal:8443/v1?api_key=[redacted]&x=1', 'user kept, password and key hidden');
  t.equal(printed.session.store, 'rediss://:[redacted]@cache.example.com:6380/0');

  const tokenOnly = parseYaml(renderConfig(loadConfig(withKeys({ upstream: 'https://ghp_t0kenValue@api.internal/' }), {}))) as { upstream: string };
  t.equal(tokenOnly.upstream, 'https://[redacted]@api.internal/', 'a user-info without a password may be a token: hidden whole');
  const plain = parseYaml(renderConfig(loadConfig(withKeys({ upstream: 'http://127.0.0.1:3000' }), {}))) as { upstream: string };
  t.equal(plain.upstream, 'http://127.0.0.1:3000', 'a URL without credentials is printed as it is');
});
