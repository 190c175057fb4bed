import t from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify as toYaml } from 'yaml';
import { pseudonymOf, startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { ensureBuilt, runCli } from '../helpers/cli-process.js';
import { sha256Base64url } from '../../src/hash.js';
import { createLogger } from '../../src/logger.js';
import { createPseudonymizer } from '../../src/pseudonym.js';

/**
 * README "Observe": users appear in logs as keyed pseudonyms (an HMAC under
 * a key derived from the first encryption key), which a reader of the logs
 * cannot compute by hashing candidate ids, and which the operator computes
 * with `gatehouse pseudonym <user id> --config FILE`.
 */
t.before(ensureBuilt);

t.test('the logged pseudonym is keyed, and the CLI computes it from the config', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const user = 'alice@example.com';
  await signIn(h.url, { user });
  const created = h.logs.find((line) => line.msg === 'session created');
  const logged = created?.userId as string;
  t.match(logged, /^[A-Za-z0-9_-]{16}$/, 'a 16-character pseudonym');
  t.notOk(h.logText().includes(user), 'the user id itself is never logged');
  t.not(logged, sha256Base64url(user).slice(0, 16), 'not a plain hash: hashing a list of addresses finds nothing');
  t.equal(logged, pseudonymOf(h, user));

  const file = join(h.dir, 'gatehouse.yaml');
  writeFileSync(file, toYaml(h.document));
  const cli = await runCli(['pseudonym', user, '--config', file]);
  t.equal(cli.code, 0, cli.stderr);
  t.equal(cli.stdout, `${logged}\n`, 'another process with the same config (a replica, a restart) computes the same pseudonym');

  const other = join(h.dir, 'other-key.yaml');
  writeFileSync(other, toYaml({ ...h.document, session: { ...(h.document.session as object), encryptionKeys: [randomBytes(32).toString('base64')] } }));
  const elsewhere = await runCli(['pseudonym', user, '--config', other]);
  t.equal(elsewhere.code, 0, elsewhere.stderr);
  t.not(elsewhere.stdout.trim(), logged, 'another key, another pseudonym');

  const missing = await runCli(['pseudonym', '--config', file]);
  t.equal(missing.code, 2, 'without a user id: usage error');
  t.match(missing.stderr, /give the user id/);
});

t.test('a logger without the key never writes a user id at all', async (t) => {
  const lines: string[] = [];
  const logger = createLogger('info', new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) }));
  logger.info({ userId: 'bob@example.com' }, 'outside a gateway');
  t.match(JSON.parse(lines[0]!), { userId: '[user]' });
  t.equal(createPseudonymizer(Buffer.alloc(32, 1).toString('base64'))('bob'), createPseudonymizer(Buffer.alloc(32, 1).toString('base64'))('bob'), 'deterministic under one key');
});
