import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { renderConfig } from '../../src/config/render.js';
import { problemsOf, withKeys } from './config-helpers.js';

/**
 * README "Several identity providers": `providers` maps names to the same
 * settings as `provider`, checked by the same rules with each problem
 * named `providers.NAME.key`; `default` is the top-level `provider`.
 */

const PARTNERS = { issuer: 'https://partners-idp.example.com', clientId: 'gh', clientSecret: 'partners-secret' };

t.test('a named provider gets the defaults of provider', async (t) => {
  const config = loadConfig(withKeys({ providers: { partners: PARTNERS } }), {});
  t.match(config.providers!.partners, {
    issuer: 'https://partners-idp.example.com',
    clientId: 'gh',
    clientAuthMethod: 'client_secret_post',
    pushedAuthorization: 'auto',
    dpop: false,
    scopes: ['openid', 'profile', 'email', 'offline_access'],
    userIdClaim: 'sub',
    timeout: 10,
  });
  t.equal(loadConfig(withKeys({}), {}).providers, undefined, 'without providers nothing is added');
  const spaced = loadConfig(withKeys({ providers: { partners: { ...PARTNERS, scopes: 'openid email' } } }), {});
  t.strictSame(spaced.providers!.partners!.scopes, ['openid', 'email'], 'space-separated scopes, as for provider');
});

t.test('each entry is checked as provider is, its problems named providers.NAME.key', async (t) => {
  t.strictSame(problemsOf(withKeys({ providers: { partners: { ...PARTNERS, issuer: 'http://idp.example.com' } } })), [
    'providers.partners.issuer: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])',
  ]);
  t.strictSame(problemsOf(withKeys({ providers: { partners: { clientId: 'gh', clientSecret: 's' } } })), [
    'providers.partners.issuer: required (or give providers.partners.authorizationEndpoint and providers.partners.tokenEndpoint for a server without discovery)',
    'providers.partners.userinfoEndpoint: required without providers.partners.issuer (the user is identified through userinfo)',
  ]);
  t.strictSame(problemsOf(withKeys({ providers: { partners: { issuer: PARTNERS.issuer, clientId: 'gh' } } })), [
    'providers.partners.clientSecret: required with clientAuthMethod client_secret_post',
  ]);
  t.strictSame(problemsOf(withKeys({ providers: { partners: { issuer: PARTNERS.issuer, clientId: 'gh', clientAuthMethod: 'private_key_jwt' } } })), [
    'providers.partners.privateKey: required with clientAuthMethod private_key_jwt (a PKCS#8 PEM private key)',
  ]);
  t.strictSame(
    problemsOf(withKeys({ providers: { partners: { ...PARTNERS, clientAuthMethod: 'private_key_jwt', privateKey: 'not a key' } } })).map((line) => line.slice(0, 30)),
    ['providers.partners.privateKey:'],
    'the key is inspected as provider.privateKey is',
  );
  t.strictSame(problemsOf(withKeys({ providers: { partners: { ...PARTNERS, dpop: 'yes' } } })), ['providers.partners.dpop: must be true or false']);
  t.strictSame(problemsOf(withKeys({ providers: { partners: { ...PARTNERS, clientid: 'x' } } })).map((line) => line.split(':')[0]), ['providers.partners.clientid']);
  // Two wrong entries: both named, neither hides the other.
  t.strictSame(problemsOf(withKeys({ providers: { a: { ...PARTNERS, issuer: 'ftp://x' }, b: { ...PARTNERS, issuer: 'ftp://y' } } })), [
    'providers.a.issuer: must be an absolute http(s) URL',
    'providers.b.issuer: must be an absolute http(s) URL',
  ]);
});

t.test('default is the top-level provider: an entry of that name is refused, and so is a name that is not one', async (t) => {
  t.strictSame(problemsOf(withKeys({ providers: { default: PARTNERS } })), [
    'providers.default: the name default is the top-level provider; give this provider another name',
  ]);
  t.strictSame(problemsOf(withKeys({ providers: { 'not a name!': PARTNERS } })), [
    'providers.not a name!: a provider name is 1 to 63 letters, digits, dots, dashes or underscores, starting with a letter or digit',
  ]);
  t.strictSame(problemsOf(withKeys({ providers: 'partners' })).map((line) => line.split(':')[0]), ['providers']);
});

t.test('check shows every provider secret redacted', async (t) => {
  const pem = '-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----';
  const config = loadConfig(withKeys({ providers: { partners: PARTNERS, keyed: { issuer: PARTNERS.issuer, clientId: 'k', clientAuthMethod: 'none', privateKey: pem } } }), {});
  const shown = renderConfig(config);
  t.notMatch(shown, 'partners-secret');
  t.notMatch(shown, 'MIGHAgEA');
  t.match(shown, /partners:\n(?:.*\n)*?\s+clientSecret: "?\[redacted\]"?/);
});
