import t from 'tap';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { isJwksUriAllowed, LogoutTokenVerifier } from '../../src/oauth/logout-token.js';
import { resignedWithForeignKey, signedByAs } from './logout-token.js';

/**
 * A loopback proxy between the gateway and the real AS that counts requests
 * for the AS's JWKS and, while `failing`, answers them 503.
 */
async function startJwksWatch(target: string) {
  const watch = { fetches: 0, failing: false, url: '', close: async () => {} };
  const server = createServer((req, res) => {
    if ((req.url ?? '').startsWith('/jwks')) {
      watch.fetches += 1;
      if (watch.failing) {
        res.writeHead(503).end();
        return;
      }
    }
    const upstream = httpRequest(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  watch.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  watch.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return watch;
}

/**
 * Back-channel logout keys (OpenID Connect Back-Channel Logout 1.0 §2.6):
 * fetched from the AS's jwks_uri only over https (http on loopback); while
 * the JWKS cannot be fetched the keys already held keep verifying, and
 * fetches back off instead of following every token. The clock of the key
 * cache is injected (verify is handed the real time: the tokens are signed by
 * the real AS now, while the cache's clock jumps ahead).
 */
t.test('the JWKS cache survives an outage of jwks_uri and backs off', async (t) => {
  const h = await startHarness({ backchannelLogout: true });
  t.teardown(() => h.close());
  const watch = await startJwksWatch(h.asProxy.target);
  t.teardown(() => watch.close());
  h.asProxy.target = watch.url;
  let clock = Date.now();
  const verifier = new LogoutTokenVerifier(h.gateway.context.providers.default.provider, CLIENT_ID, 2000, () => clock);
  const token = () => signedByAs(h.as, CLIENT_ID, { sub: 'alice' });

  t.match(await verifier.verify(await token(), Date.now()), { sub: 'alice' }, 'a valid token verifies');
  t.equal(watch.fetches, 1, 'after one JWKS fetch');

  watch.failing = true;
  clock += 11 * 60 * 1000;
  t.match(await verifier.verify(await token(), Date.now()), { sub: 'alice' }, 'keys past their age still verify while jwks_uri fails');
  t.equal(watch.fetches, 2, 'one refetch was tried');
  for (let i = 0; i < 5; i += 1) await verifier.verify(await token(), Date.now());
  t.equal(watch.fetches, 2, 'no refetch while backing off');
  await t.rejects(verifier.verify(resignedWithForeignKey(await token()), Date.now()), { code: 'GH_ERR_LOGOUT_TOKEN_INVALID' }, 'an unknown key is refused');
  t.equal(watch.fetches, 2, 'without a fetch while backing off');

  clock += 1500;
  await verifier.verify(await token(), Date.now());
  t.equal(watch.fetches, 3, 'the next try after the first backoff (1 s)');
  clock += 1500;
  await verifier.verify(await token(), Date.now());
  t.equal(watch.fetches, 3, 'the second backoff is longer (2 s)');

  watch.failing = false;
  clock += 1000;
  await verifier.verify(await token(), Date.now());
  t.equal(watch.fetches, 4, 'once jwks_uri answers again the keys are fetched');
  for (let i = 0; i < 3; i += 1) await verifier.verify(await token(), Date.now());
  t.equal(watch.fetches, 4, 'and cached');
});

t.test('without keys a failing jwks_uri gives 503 and is not refetched for every token', async (t) => {
  const h = await startHarness({ backchannelLogout: true });
  t.teardown(() => h.close());
  const watch = await startJwksWatch(h.asProxy.target);
  t.teardown(() => watch.close());
  h.asProxy.target = watch.url;
  watch.failing = true;
  const clock = Date.now();
  const verifier = new LogoutTokenVerifier(h.gateway.context.providers.default.provider, CLIENT_ID, 2000, () => clock);
  for (let i = 0; i < 5; i += 1) {
    await t.rejects(verifier.verify(await signedByAs(h.as, CLIENT_ID, { sub: 'alice' }), Date.now()), { code: 'GH_ERR_PROVIDER_UNAVAILABLE', statusCode: 503 });
  }
  t.equal(watch.fetches, 1, 'one fetch, then backing off');
});

t.test('jwks_uri must be https, except on a loopback host', async (t) => {
  t.ok(isJwksUriAllowed('https://idp.example.com/jwks'));
  t.ok(isJwksUriAllowed('http://127.0.0.1:4000/jwks'));
  t.ok(isJwksUriAllowed('http://localhost:4000/jwks'));
  t.ok(isJwksUriAllowed('http://[::1]:4000/jwks'));
  t.notOk(isJwksUriAllowed('http://idp.example.com/jwks'), 'plain http to another host is refused');
  t.notOk(isJwksUriAllowed('http://127.0.0.1.nip.io/jwks'), 'a name that only looks like loopback is refused');
  t.notOk(isJwksUriAllowed('ftp://idp.example.com/jwks'));
  t.notOk(isJwksUriAllowed('not a url'));
});
