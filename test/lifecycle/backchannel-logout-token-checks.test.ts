import t from 'tap';
import { CLIENT_ID, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { BACKCHANNEL_EVENT, jwtPayload, postLogoutToken, resignedWithForeignKey, signedByAs } from './logout-token.js';

/**
 * OpenID Connect Back-Channel Logout 1.0 §2.6: every check on a logout
 * token. Tokens are signed by the real authorization server's own key
 * (oidc-provider builds them as it does for its own back-channel calls),
 * except the forged ones. A refused token is a 400 `invalid_request` and
 * ends nothing; a valid one is a 200 with `Cache-Control: no-store`.
 */
t.test('logout token validation', async (t) => {
  const h = await startHarness({ backchannelLogout: true });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const alice = await signIn(h.url, { user: 'alice' });
  const aliceSid = jwtPayload(watch.issued.at(-1)!.idToken!).sid as string;
  const stillSignedIn = async () => (await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie } })).status === 200;

  const refused: Array<[string, RegExp, () => Promise<string>]> = [
    ['a token re-signed with a key the AS never published', /signature/, async () => resignedWithForeignKey(await signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid: aliceSid }))],
    [
      'a token whose payload was changed after signing',
      /signature/,
      async () => {
        const [header, , signature] = (await signedByAs(h.as, CLIENT_ID, { sub: 'bob' })).split('.');
        const payload = Buffer.from(JSON.stringify({ ...jwtPayload(await signedByAs(h.as, CLIENT_ID, { sub: 'bob' })), sub: 'alice' })).toString('base64url');
        return `${header}.${payload}.${signature}`;
      },
    ],
    ['a token for another client (aud)', /aud/, () => signedByAs(h.as, h.as.introspection.clientId, { sub: 'alice', sid: aliceSid })],
    ['a token without events', /events/, () => signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid: aliceSid, events: null })],
    ['a token whose events lack the back-channel logout event', /events/, () => signedByAs(h.as, CLIENT_ID, { sub: 'alice', events: { 'http://example.com/other': {} } })],
    ['a token whose logout event is not an object', /events/, () => signedByAs(h.as, CLIENT_ID, { sub: 'alice', events: { [BACKCHANNEL_EVENT]: 'yes' } })],
    ['a token with a nonce (an ID token in disguise)', /nonce/, () => signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid: aliceSid, nonce: 'n-0S6_WzA2Mj' })],
    ['a token naming neither sub nor sid', /neither a sub nor a sid/, () => signedByAs(h.as, CLIENT_ID, {})],
    ['an unsigned token (alg none)', /algorithm/, async () => {
      const payload = (await signedByAs(h.as, CLIENT_ID, { sub: 'alice' })).split('.')[1];
      return `${Buffer.from('{"alg":"none"}').toString('base64url')}.${payload}.`;
    }],
    ['garbage', /not a signed JWT/, async () => 'not-a-jwt'],
  ];
  for (const [name, reason, make] of refused) {
    const response = await postLogoutToken(h.url, await make());
    t.equal(response.status, 400, `400 for ${name}`);
    const body = (await response.json()) as { error: string; message: string };
    t.equal(body.error, 'invalid_request', 'invalid_request');
    t.match(body.message, reason, `refused for the right reason: ${body.message}`);
    t.equal(response.headers.get('cache-control'), 'no-store');
  }
  t.ok(await stillSignedIn(), 'no refused token ended the session');

  t.test('the form must carry exactly one logout_token, form-encoded', async (t) => {
    const token = await signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid: aliceSid });
    const twice = await fetch(`${h.url}/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `logout_token=${token}&logout_token=${token}`,
    });
    t.equal(twice.status, 400, 'repeated logout_token');
    const none = await fetch(`${h.url}/backchannel-logout`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'x=1' });
    t.equal(none.status, 400, 'no logout_token');
    const json = await fetch(`${h.url}/backchannel-logout`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ logout_token: token }) });
    t.equal(json.status, 415, 'JSON is not the form encoding');
    t.equal((await fetch(`${h.url}/backchannel-logout`)).status, 405, 'GET is not accepted');
    t.ok(await stillSignedIn());
  });

  t.test('an unknown sid is a 200 that ends nothing', async (t) => {
    const unknown = await postLogoutToken(h.url, await signedByAs(h.as, CLIENT_ID, { sub: 'alice', sid: 'no-such-as-session' }));
    t.equal(unknown.status, 200);
    t.equal(unknown.headers.get('cache-control'), 'no-store');
    const stranger = await postLogoutToken(h.url, await signedByAs(h.as, CLIENT_ID, { sub: 'nobody', sid: 'nor-this' }));
    t.equal(stranger.status, 200, 'an unknown user and sid too');
    t.ok(await stillSignedIn());
  });

  t.test('a valid token is accepted once; its jti replayed is refused', async (t) => {
    const bob = await signIn(h.url, { user: 'bob' });
    const bobSid = jwtPayload(watch.issued.at(-1)!.idToken!).sid as string;
    // No sub: the sid alone finds the session (the gateway linked it at sign-in).
    const token = await signedByAs(h.as, CLIENT_ID, { sid: bobSid });
    const first = await postLogoutToken(h.url, token, { origin: 'https://elsewhere.example', 'sec-fetch-site': 'cross-site' });
    t.equal(first.status, 200, 'accepted: a server-to-server call is not subject to the CSRF check');
    t.equal(first.headers.get('cache-control'), 'no-store');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 401, "bob's session has ended");
    t.ok(await stillSignedIn(), 'alice is untouched');
    const replay = await postLogoutToken(h.url, token);
    t.equal(replay.status, 400, 'the same jti again is refused');
    t.match(await replay.json(), { error: 'invalid_request', message: /jti/ });
  });

  t.test('a token with only a sub ends every session of that user', async (t) => {
    const laptop = await signIn(h.url, { user: 'dora' });
    const phone = await signIn(h.url, { user: 'dora' });
    const response = await postLogoutToken(h.url, await signedByAs(h.as, CLIENT_ID, { sub: 'dora' }));
    t.equal(response.status, 200);
    for (const { cookie } of [laptop, phone]) t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 401);
    t.ok(await stillSignedIn(), 'alice is untouched');
  });

  t.test('no log line holds a logout token', async (t) => {
    const text = h.logText();
    t.notMatch(text, /eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./, 'no JWT in the logs');
  });
});
