import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { freePort, startHarness } from '../helpers/harness.js';
import { ensureBuilt, runCli } from '../helpers/cli-process.js';
import { httpSend } from '../helpers/http-request.js';

/**
 * README "Errors" (GH_ERR_PROVIDER_ISSUER_MISMATCH): a provider whose
 * discovery document names another issuer than provider.issuer
 * (`localhost` against `127.0.0.1`, a trailing slash; OpenID Connect
 * Discovery §4.3 wants them identical) is a configuration mistake, named as
 * such once in the log and on the page, and found beforehand by
 * `gatehouse check --online`.
 */
ensureBuilt();
t.setTimeout(180_000);

t.test('the gateway names the mismatch once in the log and on every page that needs the provider', async (t) => {
  const h = await startHarness({ config: (as) => ({ provider: { issuer: as.url.replace('127.0.0.1', 'localhost') } }) });
  t.teardown(() => h.close());
  const announced = h.as.url;
  const configured = h.as.url.replace('127.0.0.1', 'localhost');
  const sentence = `the provider says its issuer is "${announced}", the config says "${configured}" (provider.issuer must be exactly the provider's)`;

  // Discovery is retried every 2 s: after three tries the mismatch is still logged once.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const named = h.logs.filter((line) => line.msg === 'provider issuer mismatch');
  t.equal(named.length, 1, 'one log line, not one per retry');
  t.match(named[0], { level: 50, code: 'GH_ERR_PROVIDER_ISSUER_MISMATCH', announced, configured, problem: sentence });
  t.notOk(h.logs.some((line) => line.msg === 'provider discovery failed'), 'not reported as an unreachable provider');
  t.notMatch(h.logText(), /OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED/, "never openid-client's code");

  const readiness = await fetch(`${h.gateway.adminAddress}/readyz`);
  t.equal(readiness.status, 503, 'not ready');

  const api = await fetch(`${h.url}/login`, { redirect: 'manual', headers: { accept: 'application/json' } });
  t.equal(api.status, 503);
  t.same(await api.json(), {
    error: 'provider_misconfigured',
    message: `Sign-in is not possible until an operator fixes the configuration: ${sentence}.`,
  });
  // node:http, not fetch: fetch sends its own Sec-Fetch-Mode (cors).
  const page = await httpSend(h.url, { path: '/login', headers: { accept: 'text/html', 'sec-fetch-mode': 'navigate' } });
  t.equal(page.status, 503);
  const html = page.body.toString('utf8');
  t.match(html, `the provider says its issuer is &quot;${announced}&quot;, the config says &quot;${configured}&quot;`, 'the page says it too');
  t.notMatch(html, /cannot be reached/, 'not "cannot be reached"');
});

async function configFile(t: Test, issuer: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-online-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gatehouse.yaml');
  writeFileSync(
    file,
    `server:\n  publicUrl: http://127.0.0.1:8080\nprovider:\n  issuer: ${issuer}\n  clientId: gatehouse-test\n  clientSecret: s3cret\nsession:\n  store: memory://\n  encryptionKeys: [${randomBytes(32).toString('base64')}]\n`,
  );
  return file;
}

t.test('gatehouse check --online fetches discovery and reports a mismatch, an unreachable provider, or that all is well', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const wrong = await runCli(['check', '--online', '--config', await configFile(t, h.as.url.replace('127.0.0.1', 'localhost'))]);
  t.equal(wrong.code, 1, 'a mismatch fails the check');
  t.match(wrong.stderr, `provider.issuer: the provider says its issuer is "${h.as.url}", the config says "${h.as.url.replace('127.0.0.1', 'localhost')}"`);
  const offline = await runCli(['check', '--config', await configFile(t, h.as.url.replace('127.0.0.1', 'localhost'))]);
  t.equal(offline.code, 0, 'without --online nothing is fetched');

  const right = await runCli(['check', '--online', '--config', await configFile(t, h.as.url)]);
  t.equal(right.code, 0, right.stderr);
  t.match(right.stderr, `online: provider.issuer: discovery answered and names ${h.as.url} as its issuer`);
  t.match(right.stdout, 'issuer: http://127.0.0.1', 'and the effective config as always');

  const closed = `http://127.0.0.1:${await freePort()}`;
  const down = await runCli(['check', '--online', '--config', await configFile(t, closed)]);
  t.equal(down.code, 1);
  t.match(down.stderr, `provider.issuer: discovery at ${closed}/.well-known/openid-configuration failed (ECONNREFUSED)`);

  const misplaced = await runCli(['--online', '--config', await configFile(t, h.as.url)]);
  t.equal(misplaced.code, 2);
  t.match(misplaced.stderr, '--online is an option of gatehouse check only');
});
