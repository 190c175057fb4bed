import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { freePort } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { ensureBuilt, runCli, spawnCli } from '../helpers/cli-process.js';

/**
 * README "Your own app in five minutes": `gatehouse demo --config FILE`
 * runs the routes of one's own config against the demo authorization
 * server (fixed port, printed client id and secret), and demo users can
 * have the email domain a rule names (`--email-domain`, or a login that is
 * an address). A config that cannot run is refused with its problems,
 * never swapped for the plain demo.
 */
ensureBuilt();
t.setTimeout(600_000);

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
}

async function ownApp(t: Test): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const app = createHttpServer((req, res) => {
    seen.push({ url: req.url!, headers: req.headers });
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`app: ${req.url}`);
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  t.teardown(() => app.close());
  return { url: `http://127.0.0.1:${(app.address() as { port: number }).port}`, seen };
}

function writeConfig(t: Test, yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-demo-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gatehouse.yaml');
  writeFileSync(file, yaml);
  return file;
}

async function ownConfig(t: Test, appUrl: string): Promise<{ file: string; gateway: string }> {
  const port = await freePort();
  const adminPort = await freePort();
  // No provider section at all, no session key: the demo supplies both.
  const file = writeConfig(
    t,
    `server:
  host: 127.0.0.1
  port: ${port}
  publicUrl: http://127.0.0.1:${port}
admin:
  port: ${adminPort}
session:
  store: memory://
routes:
  - path: /api
    upstream: ${appUrl}
    allow:
      emailDomains: [corp.test]
    headers:
      X-Forwarded-Email: email
  - path: /
    upstream: ${appUrl}
    auth: optional
`,
  );
  return { file, gateway: `http://127.0.0.1:${port}` };
}

async function started(args: string[], env: Record<string, string>) {
  const demo = spawnCli(args, env);
  await demo.waitForLog((line) => typeof line.unparsed === 'string' && /^\s*Open\s+http/.test(line.unparsed), 120_000);
  return demo;
}

t.test('demo --config: your routes and rules, against the demo authorization server on its printed port and client', async (t) => {
  const app = await ownApp(t);
  const { file, gateway } = await ownConfig(t, app.url);
  const asPort = await freePort();
  const demo = await started(['demo', '--config', file], { GATEHOUSE_DEMO_AS_PORT: String(asPort) });
  t.teardown(() => demo.stop());
  const banner = demo.stdout();
  t.match(banner, `gatehouse demo is running ${file}:`, 'the banner names your file');
  t.match(banner, new RegExp(`Open\\s+${gateway}/`), 'and the publicUrl of your config');
  t.match(banner, `issuer http://127.0.0.1:${asPort}, client id gatehouse-demo, client secret gatehouse-demo-secret (client_secret_post)`);
  t.match(banner, new RegExp(`Route\\s+/api -> ${app.url} \\(auth: required\\)`), 'your routes');
  t.match(banner, new RegExp(`Route\\s+/ -> ${app.url} \\(auth: optional\\)`));
  t.notMatch(banner, /the demo upstream/, 'no demo upstream');

  const anonymous = await fetch(`${gateway}/`, { headers: { accept: 'application/json' } });
  t.equal(await anonymous.text(), 'app: /', 'the optional route reaches your app without a session');

  const corp = await signIn(gateway, { user: 'alice@corp.test', returnTo: '/api/me' });
  const passed = await fetch(`${gateway}/api/me`, { headers: { cookie: corp.cookie, accept: 'application/json' } });
  t.equal(passed.status, 200, 'alice@corp.test passes the emailDomains rule');
  t.equal(await passed.text(), 'app: /api/me');
  t.equal(app.seen.at(-1)?.headers['x-forwarded-email'], 'alice@corp.test', 'signed in as that address');
  t.match(app.seen.at(-1)?.headers.authorization, /^Bearer \S+$/);

  const other = await signIn(gateway, { user: 'bob' });
  const refused = await fetch(`${gateway}/api/me`, { headers: { cookie: other.cookie, accept: 'application/json' } });
  t.equal(refused.status, 403, 'bob is bob@example.com by default: refused');
  t.equal((await demo.stop()).code, 0);
});

t.test('demo --email-domain: every demo user gets an address at that domain', async (t) => {
  const app = await ownApp(t);
  const { file, gateway } = await ownConfig(t, app.url);
  const demo = await started(['demo', '--config', file, '--email-domain', 'corp.test'], { GATEHOUSE_DEMO_AS_PORT: String(await freePort()) });
  t.teardown(() => demo.stop());
  t.match(demo.stdout(), 'alice is alice@corp.test', 'the banner says which address a name gets');
  const { cookie } = await signIn(gateway, { user: 'carol' });
  const response = await fetch(`${gateway}/api/x`, { headers: { cookie, accept: 'application/json' } });
  t.equal(response.status, 200);
  t.equal(app.seen.at(-1)?.headers['x-forwarded-email'], 'carol@corp.test');
  const session = (await (await fetch(`${gateway}/session`, { headers: { cookie } })).json()) as { user: Record<string, unknown> };
  t.match(session.user, { sub: 'carol', email: 'carol@corp.test', email_verified: true });
  t.equal((await demo.stop()).code, 0);
});

t.test('demo --config with a config that cannot run: exit 1 with its problems, never the plain demo', async (t) => {
  const file = writeConfig(t, 'server:\n  publicUrl: http://127.0.0.1:1\nroutes:\n  - path: /api\n    upstream: ftp://app\nsesion: {}\n');
  const result = await runCli(['demo', '--config', file], { GATEHOUSE_DEMO_AS_PORT: String(await freePort()) }, undefined, 60_000);
  t.equal(result.code, 1);
  t.match(result.stderr, `gatehouse demo --config ${file}: the config cannot run:`);
  t.match(result.stderr, 'routes[0].upstream: must be an absolute http(s) URL');
  t.match(result.stderr, 'sesion: unknown key; did you mean session?');
  t.notMatch(result.stdout, /gatehouse demo is running/, 'nothing started');
  const missing = await runCli(['demo', '--config', join(tmpdir(), 'no-such-gatehouse.yaml')], {}, undefined, 60_000);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /config file .*no-such-gatehouse\.yaml: cannot be read \(ENOENT\)/);
});

t.test('demo settings that cannot be used are named', async (t) => {
  const both = await runCli(['demo', '--config', 'x.yaml', '--upstream', 'http://127.0.0.1:3000'], {}, undefined, 60_000);
  t.equal(both.code, 2);
  t.match(both.stderr, '--upstream and --config: give one of them');
  const domain = await runCli(['demo', '--email-domain', '@corp.test'], {}, undefined, 60_000);
  t.equal(domain.code, 2);
  t.match(domain.stderr, '--email-domain: must be a domain such as corp.test (no @), got "@corp.test"');
  const port = await runCli(['demo'], { GATEHOUSE_DEMO_AS_PORT: '99999' }, undefined, 60_000);
  t.equal(port.code, 2);
  t.match(port.stderr, 'GATEHOUSE_DEMO_AS_PORT: must be a port number (1 to 65535), got "99999"');
  const misplaced = await runCli(['check', '--email-domain', 'corp.test'], {}, undefined, 60_000);
  t.equal(misplaced.code, 2);
  t.match(misplaced.stderr, '--email-domain is an option of gatehouse demo only');
});
