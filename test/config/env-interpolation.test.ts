import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, loadConfigFile } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { KEY, minimal, problemsOf, withKeys } from './config-helpers.js';

/** README "Configuration": `${NAME}` anywhere in a string value is replaced by the environment variable NAME (missing variable = config error). */

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-config-env-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function fileWith(name: string, yaml: string): string {
  const file = join(dir, name);
  writeFileSync(file, yaml);
  return file;
}

t.test('a reference is replaced as the whole value, inside a string, several times, and in list items', async (t) => {
  const config = loadConfig(
    withKeys({
      server: { publicUrl: 'https://${HOST}:${PORT}/${PREFIX}', port: '${PORT}' },
      provider: { issuer: 'https://${HOST}', clientId: '${CLIENT}-web', clientSecret: '${SECRET}', scopes: ['openid', '${SCOPE}'] },
      session: { encryptionKeys: ['${KEY_NEW}', '${KEY_OLD}'] },
    }),
    { HOST: 'app.example.org', PORT: '8443', PREFIX: 'portal', CLIENT: 'acme', SECRET: 'x y', SCOPE: 'api:read', KEY_NEW: KEY, KEY_OLD: randomBytes(32).toString('base64') },
  );
  t.equal(config.server.publicUrl, 'https://app.example.org:8443/portal');
  t.equal(config.server.port, 8443, 'a number key accepts a reference that yields digits');
  t.equal(config.provider.issuer, 'https://app.example.org');
  t.equal(config.provider.clientId, 'acme-web');
  t.equal(config.provider.clientSecret, 'x y');
  t.strictSame(config.provider.scopes, ['openid', 'api:read']);
  t.equal(config.session.encryptionKeys.length, 2);
  t.equal(config.session.encryptionKeys[0], KEY);
});

t.test('a value is used literally: not interpolated again, not parsed as YAML', async (t) => {
  const secret = 'a, b]: #c ${HOME} [d]';
  const file = fileWith('literal.yaml', 'provider:\n  issuer: https://idp.example.com\n  clientId: gatehouse\n  clientSecret: ${SECRET}\nsession:\n  encryptionKeys: [${KEY}]\n');
  const config = loadConfigFile(file, { SECRET: secret, KEY, HOME: '/should/not/appear' });
  t.equal(config.provider.clientSecret, secret);
});

t.test('references work in YAML flow sequences ([${KEY}]), block sequences and quoted strings', async (t) => {
  const other = randomBytes(32).toString('base64');
  const file = fileWith(
    'sequences.yaml',
    [
      'server:',
      '  publicUrl: "https://${HOST}"',
      "  host: '${BIND}'",
      'provider:',
      '  issuer: https://${HOST}/realms/${REALM}',
      '  clientId: gatehouse',
      '  clientSecret: ${SECRET}',
      '  scopes: [openid, ${SCOPE}, email]',
      'session:',
      '  encryptionKeys: [${KEY_A}, ${KEY_B}]',
      'csrf:',
      '  allowedOrigins:',
      '    - https://${SPA_HOST}',
      '',
    ].join('\n'),
  );
  const config = loadConfigFile(file, { HOST: 'app.example.org', BIND: '127.0.0.1', REALM: 'main', SECRET: 's', SCOPE: 'profile', KEY_A: KEY, KEY_B: other, SPA_HOST: 'spa.example.org' });
  t.equal(config.server.publicUrl, 'https://app.example.org');
  t.equal(config.server.host, '127.0.0.1');
  t.equal(config.provider.issuer, 'https://app.example.org/realms/main');
  t.strictSame(config.provider.scopes, ['openid', 'profile', 'email']);
  t.strictSame(config.session.encryptionKeys, [KEY, other]);
  t.strictSame(config.csrf.allowedOrigins, ['https://spa.example.org']);
});

t.test('a missing variable is reported as `key: environment variable NAME is not set`, for each one', async (t) => {
  const document = withKeys({
    server: { publicUrl: 'https://${PUBLIC_HOST}' },
    provider: { clientSecret: '${GATEHOUSE_CLIENT_SECRET}', scopes: ['openid', '${EXTRA_SCOPE}'] },
    session: { encryptionKeys: [KEY, '${GATEHOUSE_OLD_KEY}'] },
  });
  t.strictSame(problemsOf(document, {}).sort(), [
    'provider.clientSecret: environment variable GATEHOUSE_CLIENT_SECRET is not set',
    'provider.scopes[1]: environment variable EXTRA_SCOPE is not set',
    'server.publicUrl: environment variable PUBLIC_HOST is not set',
    'session.encryptionKeys[1]: environment variable GATEHOUSE_OLD_KEY is not set',
  ]);
});

t.test('a missing variable in a YAML file names the key, through the flow sequence too', async (t) => {
  const file = fileWith('missing.yaml', 'provider:\n  issuer: https://idp.example.com\n  clientId: gatehouse\n  clientSecret: ${GATEHOUSE_CLIENT_SECRET}\nsession:\n  encryptionKeys: [${GATEHOUSE_SESSION_KEY}]\n');
  const error = t.throws(() => loadConfigFile(file, {})) as ConfigError;
  t.strictSame(error.problems, [
    'provider.clientSecret: environment variable GATEHOUSE_CLIENT_SECRET is not set',
    'session.encryptionKeys[0]: environment variable GATEHOUSE_SESSION_KEY is not set',
  ]);
});

t.test('a variable set to the empty string counts as set, and the empty value is then refused as such', async (t) => {
  t.strictSame(problemsOf(withKeys({ provider: { clientId: '${CLIENT}' } }), { CLIENT: '' }), ['provider.clientId: must be a non-empty string']);
});

t.test('without references nothing is read from the environment', async (t) => {
  const config = loadConfig(minimal(), { GATEHOUSE_SESSION_KEY: 'not used', GATEHOUSE_CLIENT_SECRET: 'not used' });
  t.equal(config.provider.clientSecret, 'client-secret');
  t.strictSame(config.session.encryptionKeys, [KEY]);
});

t.test('a file that cannot be read or parsed is one clear problem', async (t) => {
  const unreadable = t.throws(() => loadConfigFile(join(dir, 'absent.yaml'), {})) as ConfigError;
  t.match(unreadable.problems, [/^config file .*absent\.yaml: cannot be read \(ENOENT\)$/]);
  const broken = t.throws(() => loadConfigFile(fileWith('broken.yaml', 'server:\n  port: [1\n'), {})) as ConfigError;
  t.equal(broken.problems.length, 1);
  t.match(broken.problems[0], /^config file .*broken\.yaml: not valid YAML/);
});
