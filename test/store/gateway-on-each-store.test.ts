import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { storedTokens } from '../helpers/refresh.js';

/**
 * README "Storage" through the gateway, on each single-replica backend: a new login
 * of a user replaces the token record, shared by the user's sessions; an
 * ended session yields 401 while the other lives on.
 */
for (const store of ['memory://', undefined]) {
  t.test(`on ${store ?? 'sqlite://'}`, async (t) => {
    const h = await startHarness(store ? { store } : {});
    t.teardown(() => h.close());
    const watch = watchTokenEndpoint(h.as);
    const first = await signIn(h.url, { user: 'alice' });
    const firstTokens = watch.issued.at(-1)!;
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: first.cookie } })).status, 200);
    t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${firstTokens.accessToken}`);

    const second = await signIn(h.url, { user: 'alice' });
    const secondTokens = watch.issued.at(-1)!;
    t.not(second.cookie, first.cookie, 'a new session id at every login');
    const record = await storedTokens(h, 'alice');
    t.equal(record?.accessToken, secondTokens.accessToken, 'the new login replaced the token record');
    t.equal(record?.refreshToken, secondTokens.refreshToken);
    t.equal(Object.keys(record?.sessions ?? {}).length, 2, 'which both sessions share');
    for (const { cookie } of [first, second]) {
      t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200);
      t.equal(h.upstream.received.at(-1)?.headers.authorization, `Bearer ${secondTokens.accessToken}`, 'with the new token');
    }

    const bob = await signIn(h.url, { user: 'bob' });
    t.equal((await fetch(`${h.url}/logout`, { headers: { cookie: second.cookie }, redirect: 'manual' })).status, 302);
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: second.cookie } })).status, 401, 'the ended session is unknown');
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: first.cookie } })).status, 200, "the user's other session lives on");
    t.match(await (await fetch(`${h.url}/api/me`, { headers: { cookie: bob.cookie } })).json(), { sub: 'bob' });
  });
}
