import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { loadConfig, loadConfigFile } from '../../src/config/load.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { ROOT, ensureBuilt, runCli } from '../helpers/cli-process.js';

/** config/gatehouse.example.yaml: every key of README "Configuration" and of the schema, commented, and accepted by `gatehouse check`. */

const EXAMPLE = 'config/gatehouse.example.yaml';
const text = readFileSync(`${ROOT}${EXAMPLE}`, 'utf8');
const env = { GATEHOUSE_CLIENT_SECRET: randomBytes(16).toString('base64url'), GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64') };

t.before(ensureBuilt);

t.test('gatehouse check --config config/gatehouse.example.yaml accepts it', async (t) => {
  const result = await runCli(['check', '--config', EXAMPLE], env);
  t.equal(result.stderr, '');
  t.equal(result.code, 0);
  const printed = parseYaml(result.stdout) as Record<string, Record<string, unknown>>;
  t.equal(printed.provider!.clientSecret, '[redacted]');
  t.strictSame(printed.session!.encryptionKeys, ['[redacted]']);
});

t.test('without the variables it references, check names both', async (t) => {
  const result = await runCli(['check', '--config', EXAMPLE], {});
  t.equal(result.code, 1);
  t.strictSame(result.stderr.trim().split('\n'), [
    'provider.clientSecret: environment variable GATEHOUSE_CLIENT_SECRET is not set',
    'session.encryptionKeys[0]: environment variable GATEHOUSE_SESSION_KEY is not set',
  ]);
});

t.test('every key of the schema appears in its section, set or commented out, with a comment', async (t) => {
  const sections = new Map<string, string>();
  // A section may be commented out as a whole (`# routes:`).
  for (const block of text.split(/\n(?=(?:# )?[a-z][a-zA-Z]*:(?: |$))/m)) sections.set(/^(?:# )?([a-zA-Z]+):/.exec(block)?.[1] ?? '', block);
  type Schema = { properties?: Record<string, unknown>; items?: Schema };
  const schema = ConfigSchema.properties as Record<string, Schema>;
  for (const [section, sectionSchema] of Object.entries(schema)) {
    const block = sections.get(section);
    const properties = sectionSchema.properties ?? sectionSchema.items?.properties;
    if (!t.ok(block, `section ${section} is in the example`) || !properties) continue;
    for (const key of Object.keys(properties)) {
      t.match(block, new RegExp(`^#? +(# )?(- )?${key}:`, 'm'), `${section}.${key} is in the example`);
    }
  }
  for (const key of ['authorizationEndpoint', 'tokenEndpoint', 'userinfoEndpoint', 'revocationEndpoint', 'endSessionEndpoint', 'privateKey', 'privateKeyId', 'postLogoutRedirectUri']) {
    t.match(sections.get('provider'), new RegExp(`^  # ${key}: \\S`, 'm'), `provider.${key} is shown with an example value`);
  }
  const uncommented = text.split('\n').filter((line, index, lines) => /^( +[a-zA-Z]+|upstream):/.test(line) && !line.includes('#') && !/^ *#/.test(lines[index - 1] ?? ''));
  t.strictSame(uncommented, [], 'every set key has a comment on its line or the line above');
});

t.test('the keys it sets hold the defaults, besides the issuer and the client secret', async (t) => {
  const example = loadConfigFile(`${ROOT}${EXAMPLE}`, env);
  const defaults = loadConfig({ provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: '${GATEHOUSE_CLIENT_SECRET}' } }, env);
  t.strictSame(example, defaults);
});
