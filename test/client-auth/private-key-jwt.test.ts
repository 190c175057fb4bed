import t, { type Test } from 'tap';
import { createPrivateKey, generateKeyPairSync, webcrypto } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as oidc from 'openid-client';
import { CLIENT_ID, startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { decodeJwt, watchClientRequests, type ClientRequest } from '../helpers/client-requests.js';
import { TestClock } from '../helpers/clock.js';

/**
 * README "Client authentication": with `clientAuthMethod: private_key_jwt`
 * the code exchange, every refresh and the revocation at logout
 * authenticate with a client assertion signed by `provider.privateKey`
 * (RFC 7523 §2.2); no client secret exists. The AS is a real oidc-provider
 * that knows only the public key.
 */

const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

function assertSigned(t: Test, request: ClientRequest | undefined, alg: string, kid: string, what: string): void {
  t.ok(request, `the AS received the ${what}`);
  if (!request) return;
  t.equal(request.status, 200, `the AS accepted the ${what}`);
  t.equal(request.params.client_assertion_type, ASSERTION_TYPE, `the ${what} carries a client assertion`);
  t.equal(request.params.client_secret, undefined, `the ${what} carries no client secret`);
  const { header, payload } = decodeJwt(String(request.params.client_assertion));
  t.equal(header.alg, alg, `signed ${alg}`);
  t.equal(header.kid, kid, 'naming provider.privateKeyId');
  t.equal(payload.iss, CLIENT_ID);
  t.equal(payload.sub, CLIENT_ID);
}

/** Every byte the gateway wrote: its log and its store file. */
function gatewayBytes(h: Harness): string {
  const files = readdirSync(h.dir).map((name) => readFileSync(join(h.dir, name)).toString('latin1'));
  return [h.logText(), ...files].join('\n');
}

/** The base64 body of a PEM, line by line: any of them in a log would be a leaked key. */
function pemLines(pem: string): string[] {
  return pem.split('\n').filter((line) => line.length > 20 && !line.startsWith('-----'));
}

for (const [keyType, alg] of [
  ['ec', 'ES256'],
  ['rsa', 'RS256'],
] as const) {
  t.test(`sign-in, proxy, refresh and logout with a ${alg} client assertion`, async (t) => {
    const clock = new TestClock();
    const h = await startHarness({ authMethod: 'private_key_jwt', clientKeyType: keyType, clock });
    t.teardown(() => h.close());
    const seen = watchClientRequests(h.asProxy);
    const watch = watchTokenEndpoint(h.as);
    const kid = (h.document.provider as { privateKeyId: string }).privateKeyId;

    const { cookie } = await signIn(h.url, { user: 'alice' });
    const me = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(me.status, 200, 'the upstream accepts the access token');
    t.match(await me.json(), { sub: 'alice' });
    assertSigned(t, seen.find((r) => r.path === '/token' && r.params.grant_type === 'authorization_code'), alg, kid, 'code exchange');

    clock.advance(10 * 60_000);
    const later = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(later.status, 200, 'the same cookie works once the token had to be refreshed');
    t.equal(h.as.grants.refreshToken, 1, 'one refresh');
    assertSigned(t, seen.find((r) => r.path === '/token' && r.params.grant_type === 'refresh_token'), alg, kid, 'refresh');

    const refreshToken = watch.issued.at(-1)!.refreshToken!;
    t.equal((await fetch(`${h.url}/logout`, { headers: { cookie }, redirect: 'manual' })).status, 302);
    assertSigned(t, seen.find((r) => r.path === '/token/revocation'), alg, kid, 'revocation');
    t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'the refresh token is revoked');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 401, 'signed out');

    const written = gatewayBytes(h);
    for (const line of pemLines(h.clientPrivateKey!)) t.notOk(written.includes(line), 'no line of the private key is in the log or the store file');
  });
}

t.test('the AS refuses an assertion that was tampered with, replayed, or signed by another key', async (t) => {
  const h = await startHarness({ authMethod: 'private_key_jwt' });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  await signIn(h.url, { user: 'alice' });
  const accessToken = watch.issued.at(-1)!.accessToken!;
  const kid = (h.document.provider as { privateKeyId: string }).privateKeyId;
  const metadata = { issuer: h.as.url, token_endpoint: `${h.as.url}/token` } as oidc.ServerMetadata;

  /** The form a client sends with openid-client's own assertion, to the AS's introspection endpoint (which authenticates clients like the token endpoint). */
  const assertionFor = async (pem: string): Promise<string> => {
    const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
    const key = await webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
    const body = new URLSearchParams();
    await (oidc.PrivateKeyJwt({ key, kid }) as unknown as (...args: unknown[]) => Promise<void>)(metadata, { client_id: CLIENT_ID }, body, new Headers());
    return body.get('client_assertion')!;
  };
  const present = (assertion: string) =>
    fetch(`${h.as.listenUrl}/token/introspection`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: CLIENT_ID, client_assertion_type: ASSERTION_TYPE, client_assertion: assertion, token: accessToken }),
    });

  const genuine = await assertionFor(h.clientPrivateKey!);
  const accepted = await present(genuine);
  t.equal(accepted.status, 200, 'a genuine assertion is accepted');
  t.match(await accepted.json(), { active: true });

  const replayed = await present(genuine);
  t.equal(replayed.status, 401, 'the same assertion a second time is refused (its jti is spent)');
  t.match(await replayed.json(), { error: 'invalid_client' });

  const [header, payload, signature] = (await assertionFor(h.clientPrivateKey!)).split('.');
  const longer = { ...(JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, number>) };
  longer.exp = longer.exp! + 3600;
  const tampered = await present(`${header}.${Buffer.from(JSON.stringify(longer)).toString('base64url')}.${signature}`);
  t.equal(tampered.status, 401, 'an assertion whose payload was changed is refused');
  t.match(await tampered.json(), { error: 'invalid_client' });

  const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
  const foreign = await present(await assertionFor(stranger));
  t.equal(foreign.status, 401, 'an assertion signed by another key with the same kid is refused');
  t.match(await foreign.json(), { error: 'invalid_client' });
});
