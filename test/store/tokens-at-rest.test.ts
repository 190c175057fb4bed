import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { hashSessionId } from '../../src/session/session-id.js';
import { shortLoginTokens, waitUntilExpired } from '../helpers/refresh.js';

/**
 * README "Storage": tokens are encrypted at rest and session ids stored only as a
 * hash: the bytes of the SQLite database (and its WAL) after sign-ins and a
 * refresh hold no token, no raw session id and no client secret.
 */
t.test('a copy of the SQLite store gives no token and no session id', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2) });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const sessions = [await signIn(h.url, { user: 'alice' }), await signIn(h.url, { user: 'alice' }), await signIn(h.url, { user: 'bob' })];
  await waitUntilExpired(h, watch.issued.at(-1)!.accessToken!);
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: sessions[2]!.cookie } })).status, 200);
  t.equal(watch.issued.at(-1)?.grantType, 'refresh_token', 'a refresh was stored too');

  const bytes = Buffer.concat(
    readdirSync(h.dir)
      .filter((name) => name.startsWith('sessions.sqlite'))
      .map((name) => readFileSync(join(h.dir, name))),
  ).toString('latin1');
  t.ok(bytes.length > 0);
  const secrets = watch.issued.flatMap((issued) => [issued.accessToken, issued.refreshToken, issued.idToken]).filter((s): s is string => !!s);
  t.ok(secrets.length >= 8, 'every access, refresh and ID token issued');
  for (const secret of secrets) t.notOk(bytes.includes(secret), 'an issued token is not in the store files');
  t.notOk(bytes.includes(h.clientSecret), 'nor is the client secret');
  for (const { cookie } of sessions) {
    const id = cookie.slice('session_id='.length);
    t.notOk(bytes.includes(id), 'a raw session id is not in the store files');
    t.ok(bytes.includes(hashSessionId(id)), 'its SHA-256 hash is');
  }
});
