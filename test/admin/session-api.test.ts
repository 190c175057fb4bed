import t from 'tap';
import { randomBytes } from 'node:crypto';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { introspect, watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { hashSessionId } from '../../src/session/session-id.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

/**
 * README "Ending sessions": the session API on the admin listener. It lists
 * a user's sessions by pseudonymous handles, ends one by its handle, ends
 * every session of a user and revokes the refresh token; every call needs
 * the admin token; without admin.token the paths do not exist.
 */
const TOKEN = randomBytes(32).toString('base64url');

interface Listed {
  handle: string;
  createdAt: string | null;
  expiresAt: string;
  lastSeenAt: string | null;
}

t.test('without admin.token the session API does not exist', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  for (const method of ['GET', 'DELETE']) {
    const response = await fetch(`${h.gateway.adminAddress}/sessions?user=alice`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
    t.equal(response.status, 404, `${method} /sessions is 404`);
  }
  t.equal((await fetch(`${h.gateway.adminAddress}/sessions/${'a'.repeat(22)}`, { method: 'DELETE' })).status, 404);
});

t.test('check refuses an admin token shorter than 32 characters', async (t) => {
  const document = {
    provider: { issuer: 'https://idp.example.com', clientId: 'x', clientSecret: 'y' },
    session: { encryptionKeys: [randomBytes(32).toString('base64')] },
    admin: { token: 'short-and-guessable' },
  };
  try {
    loadConfig(document, {});
    t.fail('a short token must be refused');
  } catch (err) {
    t.ok(err instanceof ConfigError && err.problems.some((line) => line.startsWith('admin.token: must be at least 32 characters')), String(err));
  }
  t.doesNotThrow(() => loadConfig({ ...document, admin: { token: TOKEN } }, {}));
});

t.test('the session API lists, ends one, and ends all of a user', async (t) => {
  const h = await startHarness({ config: { admin: { host: '127.0.0.1', port: 0, token: TOKEN } } });
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const api = (path: string, init: RequestInit & { token?: string | null } = {}) =>
    fetch(`${h.gateway.adminAddress}${path}`, {
      ...init,
      headers: init.token === null ? {} : { authorization: `Bearer ${init.token ?? TOKEN}` },
    });

  const laptop = await signIn(h.url, { user: 'alice' });
  const phone = await signIn(h.url, { user: 'alice' });
  // The second sign-in replaced the user's token record: both sessions now share its refresh token.
  const aliceRefresh = watch.issued.at(-1)!.refreshToken!;
  const bob = await signIn(h.url, { user: 'bob' });
  for (const { cookie } of [laptop, phone, bob]) t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);

  t.test('every call needs the admin token', async (t) => {
    for (const token of [null, 'wrong', `${TOKEN}x`, TOKEN.slice(0, -1)]) {
      const response = await api('/sessions?user=alice', { token });
      t.equal(response.status, 401, `token ${token === null ? 'missing' : 'wrong'}: 401`);
      t.match(response.headers.get('www-authenticate') ?? '', /^Bearer/);
      t.strictSame(await response.json(), { error: 'unauthorized' });
    }
    const basic = await fetch(`${h.gateway.adminAddress}/sessions?user=alice`, { headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` } });
    t.equal(basic.status, 401, 'only as a bearer');
    const ended = await api('/sessions?user=alice', { method: 'DELETE', token: 'wrong' });
    t.equal(ended.status, 401);
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: laptop.cookie } })).status, 200, 'a refused call ends nothing');
  });

  t.test('a missing user is a 400', async (t) => {
    t.equal((await api('/sessions')).status, 400);
    t.equal((await api('/sessions?user=a&user=b')).status, 400, 'given twice');
    t.equal((await api('/sessions', { method: 'DELETE' })).status, 400);
    t.equal((await api('/sessions/not-a-handle', { method: 'DELETE' })).status, 400);
  });

  let handles: string[] = [];
  t.test('GET /sessions?user= lists the sessions by handle, never by id or hash', async (t) => {
    const response = await api('/sessions?user=alice');
    t.equal(response.status, 200);
    t.equal(response.headers.get('cache-control'), 'no-store');
    const text = await response.text();
    const { sessions } = JSON.parse(text) as { sessions: Listed[] };
    t.equal(sessions.length, 2, 'both of alice\'s sessions');
    for (const { cookie } of [laptop, phone]) {
      const id = cookie.split('=')[1]!;
      t.notOk(text.includes(id), 'no session id');
      t.notOk(text.includes(hashSessionId(id)), 'no session hash');
    }
    for (const session of sessions) {
      t.match(session.handle, /^[A-Za-z0-9_-]{22}$/);
      t.ok(Date.parse(session.createdAt!) <= Date.now() && Date.parse(session.createdAt!) > Date.now() - 60_000, 'createdAt is the sign-in');
      t.ok(Date.parse(session.expiresAt) > Date.now() + 23 * 3600_000, 'expiresAt is the session ttl');
      t.ok(Date.parse(session.lastSeenAt!) >= Date.parse(session.createdAt!), 'lastSeenAt');
    }
    handles = sessions.map((session) => session.handle);
    t.equal(new Set(handles).size, 2);
    const again = (await (await api('/sessions?user=alice')).json()) as { sessions: Listed[] };
    t.strictSame(again.sessions.map((session) => session.handle).sort(), [...handles].sort(), 'handles are stable');
    t.strictSame(await (await api('/sessions?user=nobody')).json(), { sessions: [] }, 'an unknown user has none');
    const other = (await (await api(`/sessions?user=alice&iss=${encodeURIComponent('https://other.example.com')}`)).json()) as { sessions: Listed[] };
    t.strictSame(other.sessions, [], 'the same user id at another issuer is another user');
  });

  t.test('DELETE /sessions/<handle> ends that session only', async (t) => {
    const laptopHandle = h.gateway.context.sessionHandles.of(hashSessionId(laptop.cookie.split('=')[1]!));
    t.ok(handles.includes(laptopHandle));
    const response = await api(`/sessions/${laptopHandle}`, { method: 'DELETE' });
    t.equal(response.status, 200);
    t.strictSame(await response.json(), { ended: 1 });
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: laptop.cookie } })).status, 401, 'the laptop is signed out');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 200, 'the phone is not');
    t.equal((await introspect(h.as, aliceRefresh, 'refresh_token')).active, true, 'the refresh token stays: another session uses it');
    t.strictSame(await (await api(`/sessions/${laptopHandle}`, { method: 'DELETE' })).json(), { ended: 0 }, 'a second time ends nothing');
    const { sessions } = (await (await api('/sessions?user=alice')).json()) as { sessions: Listed[] };
    t.equal(sessions.length, 1);
  });

  t.test('DELETE /sessions?user= ends every session of the user and revokes the refresh token', async (t) => {
    const response = await api('/sessions?user=alice', { method: 'DELETE' });
    t.equal(response.status, 200);
    t.strictSame(await response.json(), { ended: 1 });
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: phone.cookie } })).status, 401, 'the phone is signed out');
    t.equal((await introspect(h.as, aliceRefresh, 'refresh_token')).active, false, 'the refresh token is revoked at the AS');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).status, 200, 'bob is not touched');
    t.strictSame(await (await api('/sessions?user=alice')).json(), { sessions: [] });
  });

  t.test('each call is logged with the caller and counts, never an id or a token', async (t) => {
    const lines = h.logs.filter((line) => typeof line.msg === 'string' && /session(s)? (listed|ended)|by the session api/.test(line.msg as string));
    t.ok(lines.length >= 4, `${lines.length} lines`);
    for (const line of lines) {
      t.equal(line.caller, '127.0.0.1', 'the admin caller\'s address');
      t.type(line.sessions, 'number');
    }
    const text = h.logText();
    for (const { cookie } of [laptop, phone, bob]) t.notOk(text.includes(cookie.split('=')[1]!), 'no session id in the logs');
    t.notOk(text.includes(TOKEN), 'no admin token in the logs');
    t.notOk(text.includes(aliceRefresh), 'no refresh token in the logs');
    t.notOk(/"userId":"alice"/.test(text), 'the user only as a pseudonym');
  });
});
