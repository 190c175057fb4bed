import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { KEY, problemsOf } from './config-helpers.js';

/** README "Configuration": "Defaults are those shown, except provider.clientId, the provider endpoints and clientSecret, which have none." */
t.test('every key not given takes the default of README "Configuration"', async (t) => {
  const config = loadConfig({ provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 's3cret' } }, { GATEHOUSE_SESSION_KEY: KEY });
  t.strictSame(config, {
    server: {
      host: '0.0.0.0',
      port: 8080,
      publicUrl: 'https://app.example.com',
      trustProxy: false,
      shutdownGrace: 10,
      idleTimeout: 60,
      maxHeaderSize: 16384,
    },
    admin: { host: '127.0.0.1', port: 9091 },
    provider: {
      issuer: 'https://idp.example.com',
      clientId: 'gatehouse',
      clientSecret: 's3cret',
      clientAuthMethod: 'client_secret_post',
      pushedAuthorization: 'auto',
      dpop: false,
      scopes: ['openid', 'profile', 'email', 'offline_access'],
      userIdClaim: 'sub',
      timeout: 10,
    },
    upstream: 'http://127.0.0.1:3000',
    session: {
      cookieName: 'session_id',
      cookieSecure: 'auto',
      cookieSameSite: 'lax',
      cookieMaxAge: 86400,
      ttl: 86400,
      idleTimeout: 0,
      store: 'sqlite://./data/gatehouse.sqlite',
      keyPrefix: 'gatehouse',
      cacheSize: 10000,
      // the documented default [${GATEHOUSE_SESSION_KEY}], interpolated
      encryptionKeys: [KEY],
    },
    tokens: { refreshSkew: 30, defaultLifetime: 300 },
    paths: { login: '/login', callback: '/callback', logout: '/logout', session: '/session', backchannelLogout: '/backchannel-logout', signedOut: '/signed-out', forwardAuth: '/forward-auth', jwks: '/.well-known/jwks.json', securityEvents: '/security-events', handoff: '/.gatehouse/handoff' },
    forwardAuth: { redirect: false, only: false },
    csrf: { allowedOrigins: [] },
    pages: { productName: 'gatehouse' },
    limits: { perUserConcurrency: 64, websocketMessageBytes: 16 * 1024 * 1024, upstreamConnections: 0 },
    machineClients: { issuers: [], introspection: false, cacheTtl: 60 },
    rateLimit: { max: 60, window: 60 },
    assertion: { lifetime: 300 },
    securityEvents: {},
  });
  for (const key of ['authorizationEndpoint', 'tokenEndpoint', 'userinfoEndpoint', 'revocationEndpoint', 'endSessionEndpoint'] as const) {
    t.notOk(key in config.provider, `provider.${key} has no default`);
  }
});

t.test('without clientId, clientSecret and GATEHOUSE_SESSION_KEY the defaults do not make a valid config', async (t) => {
  t.strictSame(problemsOf({ provider: { issuer: 'https://idp.example.com' } }), [
    'session.encryptionKeys[0]: environment variable GATEHOUSE_SESSION_KEY is not set',
    'provider.clientId: required',
    'provider.clientSecret: required with clientAuthMethod client_secret_post',
  ]);
});

t.test('the loaded configuration is frozen, down to its lists', async (t) => {
  const config = loadConfig({ provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 's' }, session: { encryptionKeys: [KEY] } }, {});
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.session) && Object.isFrozen(config.session.encryptionKeys));
  t.throws(() => {
    (config.server as { port: number }).port = 1;
  }, TypeError);
});

t.test('a section whose keys are all commented out (YAML null) means all of its defaults', async (t) => {
  const config = loadConfig({ server: null, provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 's' }, session: { encryptionKeys: [KEY] } }, {});
  t.equal(config.server.port, 8080);
});

t.test('server.idleTimeout and limits.perUserConcurrency are validated', async (t) => {
  const problems = problemsOf({ server: { idleTimeout: 'soon' }, limits: { perUserConcurrency: -1 } });
  t.ok(problems.some((line) => line.startsWith('server.idleTimeout: must be a duration')), problems.join('\n'));
  t.ok(problems.some((line) => line.startsWith('limits.perUserConcurrency: must be a whole number')), problems.join('\n'));
  const given = loadConfig({ provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 's' }, server: { idleTimeout: '2m' }, limits: { perUserConcurrency: 0 } }, { GATEHOUSE_SESSION_KEY: KEY });
  t.equal(given.server.idleTimeout, 120);
  t.equal(given.limits.perUserConcurrency, 0, '0 turns the limit off');
});

t.test('limits.websocketMessageBytes: a whole number of bytes, at least 1 (there is no unbounded message)', async (t) => {
  for (const value of [0, -1, 1.5, '16MiB']) {
    const problems = problemsOf({ limits: { websocketMessageBytes: value } });
    t.ok(problems.some((line) => line.startsWith('limits.websocketMessageBytes: must be a whole number of bytes')), `${value}: ${problems.join('\n')}`);
  }
  const given = loadConfig({ provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 's' }, limits: { websocketMessageBytes: 65536 } }, { GATEHOUSE_SESSION_KEY: KEY });
  t.equal(given.limits.websocketMessageBytes, 65536);
});

t.test('limits.upstreamConnections: 0 (no cap) or a whole number of connections', async (t) => {
  for (const value of [-1, 1.5, 'many']) {
    const problems = problemsOf({ limits: { upstreamConnections: value } });
    t.ok(problems.some((line) => line.startsWith('limits.upstreamConnections: must be a whole number of connections')), `${value}: ${problems.join('\n')}`);
  }
});
