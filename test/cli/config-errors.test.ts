import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ensureBuilt, runCli } from '../helpers/cli-process.js';

/** README "Run it" through the real entry point: invalid configs, `check`, GATEHOUSE_CONFIG. */

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-config-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
t.before(ensureBuilt);

const secret = randomBytes(24).toString('base64url');
const keys = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
const redisPassword = randomBytes(12).toString('hex');

function file(name: string, yaml: string): string {
  const path = join(dir, name);
  writeFileSync(path, yaml);
  return path;
}

const valid = file(
  'valid.yaml',
  `server:
  host: 127.0.0.1
  port: 0
admin:
  port: 0
provider:
  issuer: https://idp.example.com
  clientId: gatehouse
  clientSecret: \${GATEHOUSE_CLIENT_SECRET}
session:
  store: redis://gatehouse:${redisPassword}@127.0.0.1:6379/0
  encryptionKeys: [\${KEY_NEW}, \${KEY_OLD}]
`,
);
const validEnv = { GATEHOUSE_CLIENT_SECRET: secret, KEY_NEW: keys[0]!, KEY_OLD: keys[1]! };

const invalid = file(
  'invalid.yaml',
  `server:
  host: 127.0.0.1
  port: 0
  shutdownGrace: 10 seconds
admin:
  port: 0
provider:
  issuer: http://idp.example.com
  clientId: ""
  clientSecret: \${GATEHOUSE_CLIENT_SECRET}
session:
  store: memory://
  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]
  cookieSameSite: none
`,
);
const invalidProblems = [
  'provider.clientId: must be a non-empty string',
  'provider.clientSecret: environment variable GATEHOUSE_CLIENT_SECRET is not set',
  'provider.issuer: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])',
  'server.shutdownGrace: must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d; got "10 seconds"',
];

t.test('an invalid config exits non-zero before listening, one line per problem on stderr naming the key', async (t) => {
  const result = await runCli(['--config', invalid], { GATEHOUSE_SESSION_KEY: keys[0]! });
  t.equal(result.code, 1);
  t.equal(result.stdout, '', 'nothing logged: no listener was opened');
  t.strictSame(result.stderr.trimEnd().split('\n').sort(), invalidProblems);
});

t.test('every problem shows, the cookie rule too, once the schema problems are fixed', async (t) => {
  const fixed = file('half-fixed.yaml', `provider:\n  issuer: https://idp.example.com\n  clientId: gatehouse\n  clientSecret: s\nsession:\n  store: memory://\n  encryptionKeys: [${keys[0]}]\n  cookieSameSite: none\nserver:\n  publicUrl: http://127.0.0.1:1\n`);
  const result = await runCli(['--config', fixed]);
  t.equal(result.code, 1);
  t.strictSame(result.stderr.trimEnd().split('\n'), ['session.cookieSameSite: none requires a Secure cookie (an https publicUrl or session.cookieSecure: true)']);
});

t.test('check prints the effective config as YAML, secrets redacted, and exits 0', async (t) => {
  const result = await runCli(['check', '--config', valid], validEnv);
  t.equal(result.code, 0);
  t.equal(result.stderr, '');
  for (const value of [secret, ...keys, redisPassword]) t.notOk(result.stdout.includes(value), 'a secret is not printed');
  const printed = parseYaml(result.stdout) as Record<string, Record<string, unknown>>;
  t.equal(printed.provider!.clientSecret, '[redacted]');
  t.strictSame(printed.session!.encryptionKeys, ['[redacted]', '[redacted]']);
  t.equal(printed.session!.store, 'redis://gatehouse:[redacted]@127.0.0.1:6379/0');
  t.equal(printed.provider!.clientAuthMethod, 'client_secret_post', 'defaults are shown');
  t.equal(printed.server!.shutdownGrace, '10s');
});

t.test('check exits 1 on an invalid config, with the same lines', async (t) => {
  const result = await runCli(['check', '--config', invalid], { GATEHOUSE_SESSION_KEY: keys[0]! });
  t.equal(result.code, 1);
  t.equal(result.stdout, '');
  t.strictSame(result.stderr.trimEnd().split('\n').sort(), invalidProblems);
});

t.test('GATEHOUSE_CONFIG=FILE is the same as --config FILE', async (t) => {
  const [byFlag, byEnv, invalidByEnv, flagWins] = await Promise.all([
    runCli(['check', '--config', valid], validEnv),
    runCli(['check'], { ...validEnv, GATEHOUSE_CONFIG: valid }),
    runCli([], { GATEHOUSE_CONFIG: invalid, GATEHOUSE_SESSION_KEY: keys[0]! }),
    runCli(['check', '--config', valid], { ...validEnv, GATEHOUSE_CONFIG: invalid }),
  ]);
  t.equal(byEnv.code, 0);
  t.equal(byEnv.stdout, byFlag.stdout);
  t.equal(invalidByEnv.code, 1);
  t.strictSame(invalidByEnv.stderr.trimEnd().split('\n').sort(), invalidProblems);
  t.equal(flagWins.code, 0, '--config takes precedence over GATEHOUSE_CONFIG');
});

t.test('no config file, an unreadable one, or an unknown command: a clear message and a non-zero exit', async (t) => {
  const [none, missing, unknown] = await Promise.all([
    runCli([]),
    runCli(['check', '--config', join(dir, 'absent.yaml')]),
    runCli(['serve', '--config', valid], validEnv),
  ]);
  t.equal(none.code, 1);
  t.match(none.stderr, /^config: no file given: pass --config FILE or set GATEHOUSE_CONFIG\n/);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /^config file .*absent\.yaml: cannot be read \(ENOENT\)\n$/);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /^unknown command: serve\n/);
});

t.test('check prints warnings on stderr and still exits 0', async (t) => {
  const warned = file(
    'warned.yaml',
    `provider:\n  issuer: https://idp.example.com\n  clientId: gatehouse\n  clientSecret: s\n  scopes: openid profile\nsession:\n  store: memory://\n  encryptionKeys: [${keys[0]}]\n  ttl: 1h\n  idleTimeout: 2h\n`,
  );
  const result = await runCli(['check', '--config', warned]);
  t.equal(result.code, 0);
  t.equal(result.stderr, 'warning: session.idleTimeout: 2h is longer than session.ttl (1h): a session always ends at ttl, so the idle limit never applies\nwarning: session.cookieMaxAge: 1d is longer than session.ttl (1h): the cookie outlives its session; set it to ttl or less\n');
  t.strictSame((parseYaml(result.stdout) as { provider: { scopes: string[] } }).provider.scopes, ['openid', 'profile'], 'scopes read from a string');
});
