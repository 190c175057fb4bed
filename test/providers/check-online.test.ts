import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { freePort } from '../helpers/harness.js';
import { ensureBuilt, runCli } from '../helpers/cli-process.js';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';

/**
 * README "Several identity providers": `gatehouse check --online` fetches
 * the discovery document of `provider` and of every entry of `providers`,
 * each problem named by its key.
 */
ensureBuilt();
t.setTimeout(120_000);

async function configFile(t: Test, issuer: string, partners: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-online-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gatehouse.yaml');
  writeFileSync(
    file,
    [
      'server:\n  publicUrl: http://127.0.0.1:8080',
      `provider:\n  issuer: ${issuer}\n  clientId: gatehouse-test\n  clientSecret: s3cret`,
      `providers:\n  partners:\n    issuer: ${partners}\n    clientId: gh\n    clientSecret: partners-s3cret`,
      `session:\n  store: memory://\n  encryptionKeys: [${randomBytes(32).toString('base64')}]`,
    ].join('\n') + '\n',
  );
  return file;
}

t.test('check --online fetches each provider discovery and names the one that fails', async (t) => {
  const clients = [{ clientId: 'gatehouse-test', clientSecret: 's3cret', redirectUris: ['http://127.0.0.1:8080/callback'] }];
  const main = await startAuthorizationServer({ clients });
  const partners = await startAuthorizationServer({ clients });
  t.teardown(() => Promise.all([main.close(), partners.close()]));

  const right = await runCli(['check', '--online', '--config', await configFile(t, main.url, partners.url)]);
  t.equal(right.code, 0, right.stderr);
  t.match(right.stderr, `online: provider.issuer: discovery answered and names ${main.url} as its issuer`);
  t.match(right.stderr, `online: providers.partners.issuer: discovery answered and names ${partners.url} as its issuer`);
  t.notMatch(right.stdout, 'partners-s3cret', 'the effective config hides the named provider secret');

  const mismatched = partners.url.replace('127.0.0.1', 'localhost');
  const wrong = await runCli(['check', '--online', '--config', await configFile(t, main.url, mismatched)]);
  t.equal(wrong.code, 1, 'a mismatch at a named provider fails the check');
  t.match(wrong.stderr, `providers.partners.issuer: the provider says its issuer is "${partners.url}", the config says "${mismatched}"`);
  t.match(wrong.stderr, `online: provider.issuer: discovery answered`, 'the default provider is still reported as fine');

  const closed = `http://127.0.0.1:${await freePort()}`;
  const down = await runCli(['check', '--online', '--config', await configFile(t, main.url, closed)]);
  t.equal(down.code, 1);
  t.match(down.stderr, `providers.partners.issuer: discovery at ${closed}/.well-known/openid-configuration failed (ECONNREFUSED)`);
});
