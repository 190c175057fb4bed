import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { BearerVerifier, tokenHash } from '../../src/machine/bearer-verifier.js';
import { Provider } from '../../src/oauth/provider.js';
import { createLogger } from '../../src/logger.js';
import { isGatehouseError } from '../../src/errors.js';
import { loadConfig } from '../../src/config/load.js';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { TestClock } from '../helpers/clock.js';
import { SwitchableProxy } from '../helpers/switchable-proxy.js';

// Opaque tokens checked at a real oidc-provider's introspection endpoint
// (RFC 7662), as the gateway's own client; the proxy in front of the AS
// counts the introspection requests and simulates an outage.

const GATEWAY = { clientId: 'gateway', clientSecret: randomBytes(12).toString('base64url') };
const MACHINE = { clientId: 'nightly-report', clientSecret: randomBytes(12).toString('base64url') };

async function setup(t: Test, options: { cacheTtl?: number; accessTokenTtl?: number } = {}) {
  const proxy = await SwitchableProxy.start();
  const as = await startAuthorizationServer({
    issuer: proxy.url,
    clients: [{ clientId: GATEWAY.clientId, clientSecret: GATEWAY.clientSecret, authMethod: 'client_secret_basic', redirectUris: ['http://127.0.0.1:1/callback'] }],
    machineClients: [MACHINE],
    introspectors: [GATEWAY.clientId],
    accessTokenTtl: options.accessTokenTtl ?? 60,
  });
  proxy.target = as.listenUrl;
  const introspections: string[] = [];
  proxy.recorder = (exchange) => {
    if (exchange.path === '/token/introspection') introspections.push(exchange.body);
  };
  const lines: string[] = [];
  const log = createLogger(
    'debug',
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    }),
  ) as unknown as FastifyBaseLogger;
  const config = loadConfig(
    {
      provider: { issuer: as.url, clientId: GATEWAY.clientId, clientSecret: GATEWAY.clientSecret, clientAuthMethod: 'client_secret_basic' },
      session: { encryptionKeys: [randomBytes(32).toString('base64')] },
      machineClients: { introspection: true, cacheTtl: options.cacheTtl ?? 60 },
    },
    {},
  );
  const provider = new Provider(config.provider, log);
  await provider.start();
  const clock = new TestClock();
  const verifier = new BearerVerifier({
    settings: config.machineClients,
    provider,
    providerUserIdClaim: 'sub',
    timeoutMs: 2000,
    cacheSize: 100,
    clock,
  });
  t.teardown(async () => {
    provider.close();
    await as.close();
    await proxy.close();
  });
  const clientCredentials = async (client = MACHINE): Promise<string> => {
    const response = await fetch(`${as.listenUrl}/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    });
    const body = (await response.json()) as { access_token: string };
    return body.access_token;
  };
  return { as, proxy, verifier, clock, log, introspections, logText: () => lines.join(''), clientCredentials };
}

async function outcome(verifier: BearerVerifier, token: string, log: FastifyBaseLogger): Promise<string> {
  try {
    const caller = await verifier.verify(token, tokenHash(token), log);
    return `accepted ${caller.user}`;
  } catch (err) {
    if (isGatehouseError(err)) return err.code;
    throw err;
  }
}

t.test('a client-credentials token is introspected once per cacheTtl, concurrent requests included', async (t) => {
  const { verifier, clock, log, introspections, logText, clientCredentials } = await setup(t, { cacheTtl: 30 });
  const token = await clientCredentials();
  const callers = await Promise.all(Array.from({ length: 5 }, () => verifier.verify(token, tokenHash(token), log)));
  t.equal(introspections.length, 1, 'five concurrent requests: one introspection');
  t.equal(callers[0]!.user, MACHINE.clientId, 'no sub in a client-credentials answer: the caller is its client_id');
  t.equal(callers[0]!.claims.client_id, MACHINE.clientId);
  t.ok(verifier.peek(tokenHash(token), clock.now()));
  clock.advance(29_000);
  await verifier.verify(token, tokenHash(token), log);
  t.equal(introspections.length, 1, 'still within cacheTtl');
  clock.advance(2_000);
  t.equal(verifier.peek(tokenHash(token), clock.now()), undefined, 'cacheTtl passed');
  t.equal(await outcome(verifier, token, log), `accepted ${MACHINE.clientId}`);
  t.equal(introspections.length, 2, 'introspected again after cacheTtl');
  t.match(introspections[0], /token_type_hint=access_token/);
  t.notOk(logText().includes(token), 'no token in the log');
});

t.test('an introspection answer is not reused past the token\'s exp', async (t) => {
  const { verifier, clock, log, clientCredentials } = await setup(t, { cacheTtl: 3600 });
  const token = await clientCredentials();
  await verifier.verify(token, tokenHash(token), log);
  // oidc-provider's client-credentials tokens live 10 minutes.
  clock.advance(9 * 60_000);
  t.ok(verifier.peek(tokenHash(token), clock.now()));
  clock.advance(2 * 60_000);
  t.equal(verifier.peek(tokenHash(token), clock.now()), undefined);
});

t.test('an inactive or unknown token is 401, and its answer is cached too', async (t) => {
  const { verifier, log, introspections, as, clientCredentials } = await setup(t);
  const unknown = randomBytes(32).toString('base64url');
  t.equal(await outcome(verifier, unknown, log), 'GH_ERR_BEARER_INVALID');
  t.equal(await outcome(verifier, unknown, log), 'GH_ERR_BEARER_INVALID');
  t.equal(introspections.length, 1, 'an inactive answer is reused as well');
  const revoked = await clientCredentials();
  await fetch(`${as.listenUrl}/token/revocation`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${MACHINE.clientId}:${MACHINE.clientSecret}`).toString('base64')}` },
    body: new URLSearchParams({ token: revoked }),
  });
  t.equal(await outcome(verifier, revoked, log), 'GH_ERR_BEARER_INVALID', 'a revoked token');
});

t.test('introspection unreachable or refusing the gateway: 503, nothing cached', async (t) => {
  const { verifier, log, proxy, introspections, logText, clientCredentials } = await setup(t);
  const token = await clientCredentials();
  proxy.mode = 'down';
  t.equal(await outcome(verifier, token, log), 'GH_ERR_BEARER_UNAVAILABLE');
  proxy.mode = 'error503';
  t.equal(await outcome(verifier, token, log), 'GH_ERR_BEARER_UNAVAILABLE');
  proxy.mode = 'error400';
  t.equal(await outcome(verifier, token, log), 'GH_ERR_BEARER_UNAVAILABLE');
  proxy.mode = 'up';
  t.equal(await outcome(verifier, token, log), `accepted ${MACHINE.clientId}`, 'back: accepted');
  t.equal(introspections.length, 1);
  t.match(logText(), /token introspection failed/);
  t.notOk(logText().includes(token));
});
