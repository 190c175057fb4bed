import t from 'tap';
import { generateKeyPair } from 'jose';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { ACCOUNT_DISABLED, CREDENTIAL_CHANGE, push, SESSION_REVOKED, startTransmitter } from '../helpers/ssf-transmitter.js';
import { get, signInAcross, startReplicas, within } from '../redis/replicas.js';

/**
 * README "Ending sessions", security events: a loopback OpenID Shared
 * Signals transmitter with its own JWKS pushes SETs (RFC 8935) to two
 * replicas sharing a real redis-server. A SET that passes every check ends
 * every session of its subject on both replicas and revokes the refresh
 * token (202); every rejected SET is 400 with RFC 8935's body and ends
 * nothing, a jti replayed on the other replica included.
 */
const AUDIENCE = 'https://gatehouse.example.com/ssf';

t.test('security events from an SSF transmitter', { skip: redisMissing }, async (t) => {
  const transmitter = await startTransmitter(AUDIENCE);
  t.teardown(() => transmitter.close());
  const { h, urls } = await startReplicas(t, 2, {
    config: { securityEvents: { issuer: transmitter.issuer, audience: AUDIENCE, jwksUri: transmitter.jwksUri } },
  });
  const [a, b] = urls as [string, string];
  const watch = watchTokenEndpoint(h.as);
  const asIssuer = h.gateway.context.providers.default.provider.configuration.serverMetadata().issuer;
  const user = (sub: string) => ({ format: 'iss_sub', iss: asIssuer, sub });
  const status = async (base: string, cookie: string) => (await get(base, '/session', cookie)).status;
  const endpoint = (base: string) => `${base}/security-events`;

  const victim = await signIn(a, { user: 'victim' });
  const victimOnB = (await signInAcross(b, b, 'victim')).cookie!;

  t.test('every rejected SET is 400 with an RFC 8935 body and ends nothing', async (t) => {
    const { privateKey: foreignKey } = await generateKeyPair('ES256');
    const claims = { sub_id: user('victim'), events: { [SESSION_REVOKED]: {} } };
    const cases: Array<[string, () => Promise<string>, string, string]> = [
      ['a signature by another key under the transmitter\'s kid', () => transmitter.sign(claims, { key: foreignKey }), 'invalid_key', 'application/secevent+jwt'],
      ['HS256 (a shared secret)', () => transmitter.sign(claims, { alg: 'HS256', key: new TextEncoder().encode('x'.repeat(32)) }), 'invalid_key', 'application/secevent+jwt'],
      ['alg none', async () => transmitter.unsigned(claims), 'invalid_key', 'application/secevent+jwt'],
      ['another issuer', () => transmitter.sign({ ...claims, iss: 'https://evil.example.com' }), 'invalid_issuer', 'application/secevent+jwt'],
      ['another audience', () => transmitter.sign({ ...claims, aud: 'https://other-receiver.example.com' }), 'invalid_audience', 'application/secevent+jwt'],
      ['an iat 11 minutes old', () => transmitter.sign({ ...claims, iat: Math.floor(Date.now() / 1000) - 11 * 60 }), 'invalid_request', 'application/secevent+jwt'],
      ['an iat in the future', () => transmitter.sign({ ...claims, iat: Math.floor(Date.now() / 1000) + 10 * 60 }), 'invalid_request', 'application/secevent+jwt'],
      ['no jti', () => transmitter.sign({ ...claims, jti: undefined }), 'invalid_request', 'application/secevent+jwt'],
      ['no events', () => transmitter.sign({ sub_id: user('victim') }), 'invalid_request', 'application/secevent+jwt'],
      ['a subject of an unsupported format', () => transmitter.sign({ sub_id: { format: 'opaque', id: 'victim' }, events: { [SESSION_REVOKED]: {} } }), 'invalid_request', 'application/secevent+jwt'],
      ['another typ', () => transmitter.sign(claims, { typ: 'JWT+id' }), 'invalid_request', 'application/secevent+jwt'],
      ['not a JWT', async () => 'garbage', 'invalid_request', 'application/secevent+jwt'],
      ['a JSON body', () => transmitter.sign(claims), 'invalid_request', 'application/json'],
    ];
    for (const [name, make, err, contentType] of cases) {
      const { status: code, body } = await push(endpoint(a), await make(), contentType);
      t.equal(code, 400, `${name}: 400`);
      t.match(body, { err, description: String }, `${name}: ${err}`);
    }
    for (const [base, cookie] of [[a, victim.cookie], [b, victimOnB]] as const) t.equal(await status(base, cookie), 200, 'the victim is still signed in');
    t.equal((await fetch(endpoint(a))).status, 405, 'GET is refused, never proxied');
  });

  t.test('session-revoked with an iss_sub subject ends every session of the user on every replica and revokes the refresh token', async (t) => {
    const laptop = await signIn(a, { user: 'alice' });
    const phone = (await signInAcross(b, b, 'alice')).cookie!;
    const refreshToken = watch.issued.at(-1)!.refreshToken!;
    const set = await transmitter.sign({ sub_id: user('alice'), events: { [SESSION_REVOKED]: { event_timestamp: Math.floor(Date.now() / 1000) } } });
    const { status: code, body } = await push(endpoint(a), set);
    t.equal(code, 202);
    t.equal(body, undefined, 'no body');
    t.equal(await status(a, laptop.cookie), 401);
    await within('replica B refuses the phone', 200, async () => (await status(b, phone)) === 401);
    t.equal((await introspect(h.as, refreshToken, 'refresh_token')).active, false, 'the refresh token is revoked at the AS');
    for (const [base, cookie] of [[a, victim.cookie], [b, victimOnB]] as const) t.equal(await status(base, cookie), 200, 'another user is not touched');

    t.test('the same SET replayed on the other replica is refused and ends nothing', async (t) => {
      const again = await signIn(a, { user: 'alice' });
      const replay = await push(endpoint(b), set);
      t.equal(replay.status, 400);
      t.match(replay.body, { err: 'invalid_request', description: /jti/ });
      t.equal(await status(a, again.cookie), 200, 'alice\'s new session lives on');
      t.equal(await status(b, again.cookie), 200);
    });
  });

  t.test('credential-change with an email subject in the event (CAEP 1.0 form)', async (t) => {
    const bob = await signIn(a, { user: 'bob' });
    const set = await transmitter.sign({ events: { [CREDENTIAL_CHANGE]: { subject: { format: 'email', email: 'Bob@Example.com' }, credential_type: 'password', change_type: 'update' } } });
    t.equal((await push(endpoint(b), set)).status, 202);
    await within('bob is signed out', 200, async () => (await status(a, bob.cookie)) === 401);
    t.pass('bob is signed out');
  });

  t.test('account-disabled with a complex subject naming the user', async (t) => {
    const dave = await signIn(a, { user: 'dave' });
    const set = await transmitter.sign({ sub_id: { format: 'complex', user: user('dave') }, events: { [ACCOUNT_DISABLED]: { reason: 'hijacking' } } });
    t.equal((await push(endpoint(a), set)).status, 202);
    t.equal(await status(a, dave.cookie), 401);
  });

  t.test('an event of another type is accepted and ends nothing', async (t) => {
    const set = await transmitter.sign({ sub_id: user('victim'), events: { 'https://schemas.openid.net/secevent/caep/event-type/assurance-level-change': {} } });
    t.equal((await push(endpoint(a), set)).status, 202);
    t.equal(await status(a, victim.cookie), 200);
  });

  t.test('a rejected SET does not use up its jti', async (t) => {
    const erin = await signIn(a, { user: 'erin' });
    const jti = 'jti-of-a-rejected-set';
    const wrong = await transmitter.sign({ jti, aud: 'https://other-receiver.example.com', sub_id: user('erin'), events: { [SESSION_REVOKED]: {} } });
    t.equal((await push(endpoint(a), wrong)).status, 400);
    t.equal(await status(a, erin.cookie), 200, 'nothing ended');
    const right = await transmitter.sign({ jti, sub_id: user('erin'), events: { [SESSION_REVOKED]: {} } });
    t.equal((await push(endpoint(b), right)).status, 202, 'the valid SET with that jti is accepted');
    await within('erin is signed out', 200, async () => (await status(a, erin.cookie)) === 401);
    t.pass('erin is signed out');
  });

  t.test('the logs name no subject, token or session id', async (t) => {
    const text = h.logText();
    t.notOk(text.includes('Bob@Example.com') || text.includes('bob@example.com'), 'no email address');
    t.notOk(text.includes(victim.cookie.split('=')[1]!), 'no session id');
    t.ok(h.logs.some((line) => line.msg === 'security event received' && line.event === 'session-revoked' && line.sessions === 2), 'the ending is logged with its count');
    t.ok(h.logs.some((line) => line.msg === 'security event refused' && line.setError === 'invalid_key'), 'a refusal is logged with its RFC 8935 code');
  });
});
