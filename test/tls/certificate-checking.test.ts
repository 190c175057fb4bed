import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Agent, setGlobalDispatcher } from 'undici';
import { startAuthorizationServer, type AuthorizationServer } from '../../src/demo/authorization-server.js';
import { CLIENT_ID, freePort } from '../helpers/harness.js';
import { ensureBuilt, listeningAddress, spawnCli, type GatewayProcess } from '../helpers/cli-process.js';
import { makeTestCa, startHttpsUpstream, startTlsFront, type HttpsUpstream, type TestCa, type TlsFront } from '../helpers/test-ca.js';
import { signIn } from '../helpers/sign-in.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * README "TLS": toward the upstream and the authorization server the
 * gateway is a TLS client, and an https URL must present a certificate the
 * process trusts. Here both are https with a certificate from a CA made at
 * test time, and the gateway runs as its own process (`node dist/cli.js`)
 * without that CA, then with it through NODE_EXTRA_CA_CERTS, which every TLS
 * client in the gateway reads: the proxy's undici pool, openid-client's
 * fetch (discovery, the token endpoint, the JWKS), the Redis client
 * (test/tls/rediss.test.ts).
 */

ensureBuilt();
t.setTimeout(120_000);

interface Cast {
  ca: TestCa;
  front: TlsFront;
  as: AuthorizationServer;
  upstream: HttpsUpstream;
  publicUrl: string;
  dir: string;
  configFile: string;
  env: Record<string, string>;
}

/** oidc-provider behind an https front (issuer https://127.0.0.1:PORT), an https upstream, and a gateway config naming both. */
async function startCast(t: Test): Promise<Cast> {
  const ca = makeTestCa();
  const front = await startTlsFront(ca);
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  const as = await startAuthorizationServer({
    issuer: front.url,
    clients: [{ clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: [`${publicUrl}/callback`], postLogoutRedirectUris: [`${publicUrl}/`] }],
    accessTokenTtl: 60,
  });
  const listen = new URL(as.listenUrl);
  front.target = { host: listen.hostname, port: Number(listen.port) };
  const upstream = await startHttpsUpstream(ca);
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-tls-'));
  const configFile = join(dir, 'gatehouse.yaml');
  writeFileSync(
    configFile,
    `server:
  host: 127.0.0.1
  port: ${port}
  publicUrl: ${publicUrl}
  shutdownGrace: 1s
admin:
  host: 127.0.0.1
  port: 0
provider:
  issuer: ${as.url}
  clientId: ${CLIENT_ID}
  clientSecret: \${GATEHOUSE_CLIENT_SECRET}
routes:
  - path: /open
    auth: public
    upstream: ${upstream.url}
  - path: /
    upstream: ${upstream.url}
session:
  store: memory://
  encryptionKeys: [\${GATEHOUSE_SESSION_KEY}]
`,
  );
  t.teardown(async () => {
    await upstream.close();
    await as.close();
    await front.close();
    ca.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { ca, front, as, upstream, publicUrl, dir, configFile, env: { GATEHOUSE_CLIENT_SECRET: clientSecret, GATEHOUSE_SESSION_KEY: randomBytes(32).toString('base64') } };
}

async function startGateway(t: Test, cast: Cast, env: Record<string, string> = {}): Promise<{ gateway: GatewayProcess; admin: string }> {
  // spawnCli passes only PATH and HOME on: the CA is trusted only when given here.
  const gateway = spawnCli(['--config', cast.configFile], { ...cast.env, ...env }, cast.dir);
  t.teardown(() => gateway.stop());
  await listeningAddress(gateway, 'listening');
  return { gateway, admin: await listeningAddress(gateway, 'admin listening') };
}

const CERTIFICATE_CODE = /CERT|ISSUER|SIGNATURE/;

t.test('without the CA: the https AS and the https upstream are refused, with a clean 503/502 and a log line naming the certificate problem', async (t) => {
  const cast = await startCast(t);
  const { gateway, admin } = await startGateway(t, cast);

  const discovery = await gateway.waitForLog((line) => line.msg === 'provider discovery failed');
  t.match(discovery, { level: 40, failure: { code: CERTIFICATE_CODE, endpoint: `${new URL(cast.as.url).host}/.well-known/openid-configuration` } }, `the log names the certificate problem: ${JSON.stringify(discovery.failure)}`);
  t.ok(cast.front.connections >= 1, 'the gateway did connect to the https front');
  t.equal((await fetch(`${admin}/readyz`)).status, 503, 'not ready');
  const login = await fetch(`${cast.publicUrl}/login`, { redirect: 'manual', headers: { accept: 'application/json' } });
  t.equal(login.status, 503, 'sign-in: 503');
  t.match(await login.json(), { error: 'provider_unavailable' });
  t.same(cast.as.grants, { authorizationCode: 0, refreshToken: 0, refreshTokenErrors: 0, tokenExchange: 0, byTarget: {} }, 'no token was issued');

  const open = await fetch(`${cast.publicUrl}/open/x`, { headers: { accept: 'application/json' } });
  t.equal(open.status, 502, 'the https upstream with an unknown CA: 502');
  t.match(await open.json(), { error: 'bad_gateway' });
  t.same(cast.upstream.requests, [], 'no request reached the upstream');
  const failed = await gateway.waitForLog((line) => line.msg === 'upstream failed');
  t.match(failed, { level: 40, failure: { code: CERTIFICATE_CODE } }, `the log names it: ${JSON.stringify(failed.failure)}`);
  t.notMatch(gateway.stdout(), /BEGIN CERTIFICATE|clientSecret/, 'no certificate or secret in the log');
});

t.test('with the CA in NODE_EXTRA_CA_CERTS: discovery, sign-in (token endpoint, JWKS) and the proxy all work over TLS', async (t) => {
  const cast = await startCast(t);
  // The test's own browser (fetch) trusts the CA too, to sign in at the https AS.
  setGlobalDispatcher(new Agent({ connect: { ca: [...rootCertificates, cast.ca.ca] } }));
  const { gateway, admin } = await startGateway(t, cast, { NODE_EXTRA_CA_CERTS: cast.ca.caFile });

  await waitFor('readiness', async () => (await fetch(`${admin}/readyz`)).status === 200, 15_000);
  t.pass('ready: discovery over TLS succeeded');
  const open = await fetch(`${cast.publicUrl}/open/x?y=1`);
  t.equal(open.status, 200, 'the https upstream is reached');
  t.same(await open.json(), { path: '/open/x?y=1' });

  const { cookie } = await signIn(cast.publicUrl, { user: 'tls-user' });
  t.equal(cast.as.grants.authorizationCode, 1, 'the code was exchanged at the https token endpoint');
  const session = await fetch(`${cast.publicUrl}/session`, { headers: { cookie } });
  t.equal(session.status, 200, 'signed in (the ID token checked against the JWKS fetched over TLS)');
  t.match(await session.json(), { user: { sub: 'tls-user' } });
  t.equal((await fetch(`${cast.publicUrl}/api/me`, { headers: { cookie } })).status, 200, 'a signed-in request reaches the https upstream');
  t.notOk(gateway.logs.some((line) => line.msg === 'provider discovery failed' || line.msg === 'upstream failed'), 'no TLS failure logged');
});
