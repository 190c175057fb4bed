import t from 'tap';
import { problemsOf, withKeys, KEY } from './config-helpers.js';

/**
 * STYLE (from oauth2-proxy): collect every config problem, then fail once
 * with all of them — one `key: what is wrong` line each (README "Run it").
 */

t.test('several wrong keys give one line each', async (t) => {
  const problems = problemsOf(
    withKeys({
      server: { port: 'eighty', trustProxy: 'maybe' },
      admin: { port: 70000 },
      provider: { clientAuthMethod: 'client_secret_jwt' },
      session: { cookieSameSite: 'loose', cacheSize: 0 },
    }),
  );
  t.strictSame(problems.sort(), [
    'admin.port: must be a port number (0 to 65535)',
    'provider.clientAuthMethod: must be one of: client_secret_post, client_secret_basic, none, private_key_jwt',
    'server.port: must be a port number (0 to 65535)',
    'server.trustProxy[0]: maybe is not an IP address or a CIDR such as 10.0.0.0/8',
    'session.cacheSize: must be a positive whole number',
    'session.cookieSameSite: must be one of: lax, strict, none',
  ]);
});

t.test('schema problems and problems between keys are reported together', async (t) => {
  const problems = problemsOf(
    withKeys({
      server: { port: -1, publicUrl: 'http://app.example.com' },
      provider: { issuer: 'http://idp.example.com', clientSecret: undefined, clientId: '${CLIENT_ID}' },
      session: { encryptionKeys: [KEY, 'c2hvcnQ='], cookieSameSite: 'none', store: 'postgres://db/sessions' },
      tokens: { refreshSkew: 'soon' },
    }),
  );
  t.strictSame(problems.sort(), [
    'provider.clientId: environment variable CLIENT_ID is not set',
    'provider.clientSecret: required with clientAuthMethod client_secret_post',
    'provider.issuer: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])',
    'server.port: must be a port number (0 to 65535)',
    'server.publicUrl: must use https on app.example.com (http is allowed only on localhost, *.localhost, 127.0.0.0/8 and [::1]); terminate TLS in front of gatehouse and give the https URL browsers use',
    'session.cookieSameSite: none requires a Secure cookie (an https publicUrl or session.cookieSecure: true)',
    'session.encryptionKeys[1]: must be base64 of exactly 32 bytes, got 5 (generate one with: openssl rand -base64 32)',
    'session.store: must be memory://, sqlite://PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER[/DB] or redis+cluster://HOST:PORT[,HOST:PORT…] (rediss+ for TLS)',
    'tokens.refreshSkew: must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d; got "soon"',
  ]);
});

t.test('a wrong key is reported once, not again through a check that depends on it', async (t) => {
  // The issuer is missing from the environment: no "issuer required" or "userinfoEndpoint required without issuer".
  t.strictSame(problemsOf(withKeys({ provider: { issuer: '${ISSUER}' } })), ['provider.issuer: environment variable ISSUER is not set']);
  // A misspelt auth method: no "clientSecret required with client_secret_post" (the default it fell back to).
  t.strictSame(problemsOf(withKeys({ provider: { clientAuthMethod: 'secret_post', clientSecret: undefined } })), [
    'provider.clientAuthMethod: must be one of: client_secret_post, client_secret_basic, none, private_key_jwt',
  ]);
  // A wrong cookieSecure: no SameSite=None verdict drawn from the default `auto`.
  t.strictSame(problemsOf(withKeys({ server: { publicUrl: 'http://127.0.0.1:8080' }, session: { cookieSecure: 'yes', cookieSameSite: 'none' } })), [
    'session.cookieSecure: must be auto, true or false',
  ]);
  // A missing key in a list: the other items keep their positions and are still checked.
  t.strictSame(problemsOf(withKeys({ session: { encryptionKeys: ['${NEW_KEY}', 'bm90IGEga2V5'] } })), [
    'session.encryptionKeys[0]: environment variable NEW_KEY is not set',
    'session.encryptionKeys[1]: must be base64 of exactly 32 bytes, got 9 (generate one with: openssl rand -base64 32)',
  ]);
});

t.test('unknown keys are refused, in a section and at the top level', async (t) => {
  t.strictSame(problemsOf(withKeys({ provider: { clientSecert: 'typo' }, sesion: { ttl: '1h' } })).sort(), [
    'provider.clientSecert: unknown key; did you mean provider.clientSecret?',
    'sesion: unknown key; did you mean session?',
  ]);
  t.strictSame(problemsOf(withKeys({ server: { ttl: '1h' } })), ['server.ttl: unknown key; it belongs in session (session.ttl)'], 'a key in the wrong section');
  t.strictSame(problemsOf(withKeys({ provider: { colour: 'blue' } })), ['provider.colour: unknown key (check its spelling and section)'], 'nothing near: no guess');
});

t.test('a value of the wrong shape names its key', async (t) => {
  t.strictSame(problemsOf(withKeys({ server: 'localhost:8080' })), ['server: must be a mapping of keys']);
  t.strictSame(problemsOf(withKeys({ provider: { scopes: { openid: true } } })), ['provider.scopes: must be a list of scopes']);
  // A string is a space-separated list (RFC 6749 §3.3), as authorization servers' docs write scopes; its items are checked as scopes.
  t.strictSame(problemsOf(withKeys({ provider: { scopes: 'openid "profile"' } })), ['provider.scopes[1]: must be a scope token (no spaces or quotes)']);
  t.strictSame(problemsOf(withKeys({ provider: { scopes: ['openid profile'] } })), ['provider.scopes[0]: must be a scope token (no spaces or quotes)']);
  t.strictSame(problemsOf(withKeys({ session: { encryptionKeys: [] } })), ['session.encryptionKeys: must be a list of at least one base64 key']);
  t.strictSame(problemsOf(['server']), ['config: must be a YAML mapping of sections (server, provider, session, ...)']);
});

t.test('numbers and booleans are not truncated or guessed', async (t) => {
  t.strictSame(problemsOf(withKeys({ server: { port: 8080.5 } })), ['server.port: must be a port number (0 to 65535)']);
  t.strictSame(problemsOf(withKeys({ server: { port: '${PORT}' } }), { PORT: '8080.5' }), ['server.port: must be a port number (0 to 65535)']);
  t.strictSame(problemsOf(withKeys({ server: { port: true } })), ['server.port: must be a port number (0 to 65535)']);
  t.strictSame(problemsOf(withKeys({ server: { trustProxy: 1.5 } })), ['server.trustProxy: must be false, a hop count such as 1, or a list of the proxies\' addresses/CIDRs such as [10.0.0.0/8]']);
  t.strictSame(problemsOf(withKeys({ session: { cacheSize: '1e3' } })), ['session.cacheSize: must be a positive whole number']);
});

t.test('a mapping where a list belongs, or a list where a mapping belongs, is refused rather than merged with defaults', async (t) => {
  t.strictSame(problemsOf(withKeys({ session: { encryptionKeys: { primary: KEY } } })), ['session.encryptionKeys: must be a list of at least one base64 key']);
  t.strictSame(problemsOf(withKeys({ server: ['127.0.0.1', 8080] as unknown as Record<string, unknown> })), ['server: must be a mapping of keys']);
});
