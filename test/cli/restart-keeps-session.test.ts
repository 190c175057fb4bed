import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBuilt, spawnCli } from '../helpers/cli-process.js';
import { startCast } from './cast.js';
import { signIn } from '../helpers/sign-in.js';

/** README "Storage": the default store is SQLite and survives restarts; README "Configuration": a sqlite:// path is relative to the working directory. */

t.before(ensureBuilt);

t.test('a session survives a gateway restart on the same SQLite file', async (t) => {
  const cast = await startCast();
  t.teardown(() => cast.close());

  const first = spawnCli(['--config', cast.configFile], cast.env, cast.dir);
  t.teardown(() => first.stop());
  await first.waitForLog((line) => line.msg === 'listening');
  const { cookie } = await signIn(cast.publicUrl, { user: 'alice' });
  const before = await fetch(`${cast.publicUrl}/api/me`, { headers: { cookie } });
  t.equal(before.status, 200);
  t.strictSame(await first.stop(), { code: 0, signal: null }, 'the first gateway stopped cleanly');
  t.ok(existsSync(join(cast.dir, 'data', 'sessions.sqlite')), 'sqlite://data/sessions.sqlite was created under the working directory');

  const second = spawnCli(['--config', cast.configFile], cast.env, cast.dir);
  t.teardown(() => second.stop());
  await second.waitForLog((line) => line.msg === 'listening');
  const received = cast.upstream.received.length;
  const after = await fetch(`${cast.publicUrl}/api/me`, { headers: { cookie } });
  t.equal(after.status, 200, 'the same cookie still works');
  t.match(await after.json(), { sub: 'alice' });
  t.equal(cast.upstream.received.length, received + 1, 'the request reached the upstream');
  t.match(cast.upstream.received.at(-1), { active: true, sub: 'alice' }, 'with a valid bearer token of the user');
  const session = await fetch(`${cast.publicUrl}/session`, { headers: { cookie } });
  t.equal(session.status, 200);
  t.match(await session.json(), { user: { sub: 'alice' } });
  t.equal(cast.as.grants.authorizationCode, 1, 'no new sign-in happened');
  t.strictSame(await second.stop(), { code: 0, signal: null });
});
