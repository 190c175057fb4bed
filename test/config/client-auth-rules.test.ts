import t from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/**
 * README "Client authentication and sender-constrained tokens": `check`
 * refuses a `provider.privateKey` that does not parse or cannot sign ES256,
 * RS256 or PS256, and never quotes the key in the problem it reports; it
 * validates `pushedAuthorization`.
 */

const pkcs8 = (key: ReturnType<typeof generateKeyPairSync>['privateKey']) => key.export({ format: 'pem', type: 'pkcs8' }) as string;
const keyed = (privateKey: string) => withKeys({ provider: { clientAuthMethod: 'private_key_jwt', clientSecret: undefined, privateKey, privateKeyId: 'k1' } });

t.test('an EC P-256 key and an RSA key of 2048 bits are accepted', async (t) => {
  for (const key of [generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey]) {
    const config = loadConfig(keyed(pkcs8(key)), {});
    t.equal(config.provider.clientAuthMethod, 'private_key_jwt');
    t.equal(config.provider.privateKeyId, 'k1');
  }
});

t.test('a key that does not parse, is encrypted, or is a public key is refused', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const garbage = `-----BEGIN PRIVATE KEY-----\n${Buffer.from('not a key at all, only some bytes').toString('base64')}\n-----END PRIVATE KEY-----`;
  const encrypted = privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
  const publicPem = publicKey.export({ format: 'pem', type: 'spki' }) as string;
  for (const [name, pem] of [
    ['garbage', garbage],
    ['an encrypted key', encrypted],
    ['a public key', publicPem],
  ]) {
    const problems = problemsOf(keyed(pem!));
    t.strictSame(problems, ['provider.privateKey: does not parse as an unencrypted PEM private key (PKCS#8: -----BEGIN PRIVATE KEY-----)'], name!);
  }
});

t.test('a key that does not fit ES256, RS256 or PS256 is refused, and the key is never quoted', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['EC P-384', pkcs8(generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey), /^provider\.privateKey: is an EC key on secp384r1: it must be an EC P-256 key \(ES256\)/],
    ['Ed25519', pkcs8(generateKeyPairSync('ed25519').privateKey), /^provider\.privateKey: is a ed25519 key: it must be/],
    ['RSA 1024', pkcs8(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey), /^provider\.privateKey: is an RSA key of 1024 bits: RS256 and PS256 need at least 2048$/],
  ];
  for (const [name, pem, expected] of cases) {
    const problems = problemsOf(keyed(pem));
    t.equal(problems.length, 1, name);
    t.match(problems[0], expected, name);
    const body = pem.split('\n')[1]!;
    t.notOk(problems.join('\n').includes(body), `${name}: the key is not in the message`);
  }
});

t.test('pushedAuthorization is auto, required or off; required needs discovery', async (t) => {
  t.equal(loadConfig(withKeys({}), {}).provider.pushedAuthorization, 'auto');
  t.strictSame(problemsOf(withKeys({ provider: { pushedAuthorization: 'always' } })), ['provider.pushedAuthorization: must be one of: auto, required, off']);
  const endpoints = { issuer: undefined, authorizationEndpoint: 'https://as.example.com/authorize', tokenEndpoint: 'https://as.example.com/token', userinfoEndpoint: 'https://as.example.com/userinfo' };
  t.strictSame(problemsOf(withKeys({ provider: { ...endpoints, pushedAuthorization: 'required' } })), [
    'provider.pushedAuthorization: required needs provider.issuer (the endpoint comes from discovery)',
  ]);
  t.equal(loadConfig(withKeys({ provider: { ...endpoints, pushedAuthorization: 'auto' } }), {}).provider.pushedAuthorization, 'auto');
});

t.test('dpop is true or false, false by default', async (t) => {
  t.equal(loadConfig(withKeys({}), {}).provider.dpop, false);
  t.equal(loadConfig(withKeys({ provider: { dpop: true } }), {}).provider.dpop, true);
  t.strictSame(problemsOf(withKeys({ provider: { dpop: 'yes' } })), ['provider.dpop: must be true or false']);
});
