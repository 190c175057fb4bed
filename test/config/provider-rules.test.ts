import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "Configuration": provider URLs must be https, except http on loopback hosts; issuer or explicit endpoints; a secret for secret-based auth. */

const HTTPS_ONLY = 'must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])';
const ENDPOINTS = {
  issuer: undefined,
  authorizationEndpoint: 'https://as.example.com/authorize',
  tokenEndpoint: 'https://as.example.com/token',
  userinfoEndpoint: 'https://as.example.com/userinfo',
};

t.test('http is accepted for the authorization server on loopback hosts only', async (t) => {
  for (const host of ['localhost', '127.0.0.1', '127.10.20.30', '[::1]', 'localhost:8443', '127.0.0.1:9000']) {
    const config = loadConfig(withKeys({ provider: { issuer: `http://${host}/realms/test` } }), {});
    t.equal(config.provider.issuer, `http://${host}/realms/test`, host);
  }
  for (const host of ['idp.example.com', '10.0.0.1', '128.0.0.1', '192.168.1.10', '[::2]', '[fe80::1]', 'localhost.example.com', '127.0.0.1.nip.io', '0.0.0.0']) {
    t.strictSame(problemsOf(withKeys({ provider: { issuer: `http://${host}/` } })), [`provider.issuer: ${HTTPS_ONLY}`], host);
  }
});

t.test('every provider endpoint follows the https rule and names itself', async (t) => {
  const keys = ['authorizationEndpoint', 'tokenEndpoint', 'userinfoEndpoint', 'revocationEndpoint', 'endSessionEndpoint'];
  const document = withKeys({ provider: Object.fromEntries(keys.map((key) => [key, `http://as.example.com/${key}`])) });
  t.strictSame(problemsOf(document), keys.map((key) => `provider.${key}: ${HTTPS_ONLY}`));
  t.strictSame(problemsOf(withKeys({ provider: { issuer: 'idp.example.com' } })), ['provider.issuer: must be an absolute http(s) URL']);
  t.strictSame(problemsOf(withKeys({ provider: { tokenEndpoint: 'ftp://as.example.com/token' } })), ['provider.tokenEndpoint: must be an absolute http(s) URL']);
});

t.test('explicit endpoints replace the issuer: authorization and token endpoints, and userinfo to identify the user', async (t) => {
  const config = loadConfig(withKeys({ provider: ENDPOINTS }), {});
  t.equal(config.provider.issuer, undefined);
  t.equal(config.provider.tokenEndpoint, 'https://as.example.com/token');

  t.strictSame(problemsOf(withKeys({ provider: { ...ENDPOINTS, tokenEndpoint: undefined } })), [
    'provider.issuer: required (or give provider.authorizationEndpoint and provider.tokenEndpoint for a server without discovery)',
  ]);
  t.strictSame(problemsOf(withKeys({ provider: { ...ENDPOINTS, userinfoEndpoint: undefined } })), [
    'provider.userinfoEndpoint: required without provider.issuer (the user is identified through userinfo)',
  ]);
  t.strictSame(problemsOf(withKeys({ provider: { issuer: undefined } })), [
    'provider.issuer: required (or give provider.authorizationEndpoint and provider.tokenEndpoint for a server without discovery)',
    'provider.userinfoEndpoint: required without provider.issuer (the user is identified through userinfo)',
  ]);
});

t.test('clientSecret is required for client_secret_post and client_secret_basic, not for none', async (t) => {
  for (const method of ['client_secret_post', 'client_secret_basic']) {
    t.strictSame(problemsOf(withKeys({ provider: { clientAuthMethod: method, clientSecret: undefined } })), [
      `provider.clientSecret: required with clientAuthMethod ${method}`,
    ]);
  }
  const config = loadConfig(withKeys({ provider: { clientAuthMethod: 'none', clientSecret: undefined } }), {});
  t.equal(config.provider.clientAuthMethod, 'none');
});

t.test('private_key_jwt needs a private key', async (t) => {
  t.strictSame(problemsOf(withKeys({ provider: { clientAuthMethod: 'private_key_jwt', clientSecret: undefined } })), [
    'provider.privateKey: required with clientAuthMethod private_key_jwt (a PKCS#8 PEM private key)',
  ]);
});
