import t from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { forgetSeen, startRoutesHarness } from '../helpers/routes-harness.js';
import { JwtIssuer } from '../helpers/jwt-issuer.js';
import { httpSend } from '../helpers/http-request.js';

/**
 * README "Identity assertion" and "Machine clients": a machine client
 * admitted by its own token gets the route's assertion too (no `sid`: it
 * has no session), through the proxy and in forward-auth's answer; it is
 * reused for the same caller and route, and a forged copy never passes.
 */
const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;

t.test('a machine client gets the route\'s identity assertion', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const h = await startRoutesHarness(
    ({ api }) => [{ path: '/api', upstream: api.url, accept: ['session', 'bearer'], assertion: { audience: 'orders', claims: ['team'] } }],
    {
      config: {
        assertion: { signingKeys: [signingKey] },
        forwardAuth: { trustedProxies: ['127.0.0.1/32'] },
        machineClients: { issuers: [{ issuer: issuer.url, audiences: ['gatehouse'] }] },
      },
    },
  );
  t.teardown(() => h.close());
  const jwks = createRemoteJWKSet(new URL('/.well-known/jwks.json', h.url));
  const token = await issuer.sign({ sub: 'system:serviceaccount:reports:nightly', aud: 'gatehouse', team: 'ops' });
  const verify = (jwt: unknown) => jwtVerify(String(jwt), jwks, { issuer: new URL(h.url).origin, audience: 'orders', algorithms: ['ES256'] });

  forgetSeen(h);
  const headers = { authorization: `Bearer ${token}`, 'x-gatehouse-assertion': 'forged' };
  t.equal((await fetch(`${h.url}/api/a`, { headers })).status, 200);
  t.equal((await fetch(`${h.url}/api/b`, { headers })).status, 200);
  t.equal(h.api.seen.length, 2);
  const first = h.api.seen[0]!.headers['x-gatehouse-assertion'];
  t.not(first, 'forged', "the caller's copy never passes");
  const { payload } = await verify(first);
  t.equal(payload.sub, 'system:serviceaccount:reports:nightly');
  t.equal(payload.team, 'ops');
  t.notOk('sid' in payload, 'no session, no sid');
  t.equal(h.api.seen[1]!.headers['x-gatehouse-assertion'], first, 'reused for the same caller and route');

  const answer = await httpSend(h.url, {
    path: '/forward-auth',
    headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/api/c', authorization: `Bearer ${token}` },
  });
  t.equal(answer.status, 200);
  t.equal((await verify(answer.headers['x-gatehouse-assertion'])).payload.sub, 'system:serviceaccount:reports:nightly', 'forward-auth hands it to the proxy');
});
