import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import t from 'tap';
import { freePort } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { ensureBuilt, runCli, spawnCli } from '../helpers/cli-process.js';

/**
 * `gatehouse demo` beyond the happy path the browser test walks (README
 * "Try it"): a busy port ends the process with a hint instead of hanging,
 * `--upstream URL` puts the demo in front of the user's own service, and
 * the demo upstream echoes a path it has no page for instead of a 404.
 */
ensureBuilt();
// Four demos (each an authorization server, an upstream and a gateway) one after another: on a busy CI machine that is minutes.
t.setTimeout(600_000);

async function demoEnv(): Promise<Record<string, string>> {
  return { GATEHOUSE_DEMO_PORT: String(await freePort()), GATEHOUSE_DEMO_ADMIN_PORT: String(await freePort()), GATEHOUSE_DEMO_AS_PORT: String(await freePort()) };
}

async function started(args: string[], env: Record<string, string>) {
  const demo = spawnCli(args, env);
  await demo.waitForLog((line) => typeof line.unparsed === 'string' && /^\s*Open\s+http/.test(line.unparsed), 120_000);
  return demo;
}

t.test('a busy port exits 1 with the variable to set, instead of hanging', async (t) => {
  for (const variable of ['GATEHOUSE_DEMO_PORT', 'GATEHOUSE_DEMO_ADMIN_PORT', 'GATEHOUSE_DEMO_AS_PORT'] as const) {
    const env = await demoEnv();
    const busy = createTcpServer();
    await new Promise<void>((resolve) => busy.listen(Number(env[variable]), '127.0.0.1', resolve));
    const result = await runCli(['demo'], env, undefined, 120_000);
    busy.close();
    t.equal(result.code, 1, `${variable} taken: exit 1 (not killed by the timeout)`);
    t.match(result.stderr, new RegExp(`port ${env[variable]} is already in use: set ${variable} to a free port`), 'names the variable');
    t.notMatch(result.stderr, /EADDRINUSE/, 'not a raw error code');
  }
});

t.test('--upstream URL: the demo authorization server and gateway in front of your own service', async (t) => {
  const seen: IncomingHttpHeaders[] = [];
  const own = createHttpServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`mine: ${req.url}`);
  });
  await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
  t.teardown(() => own.close());
  const ownUrl = `http://127.0.0.1:${(own.address() as { port: number }).port}`;
  const env = await demoEnv();
  const demo = await started(['demo', '--upstream', ownUrl], env);
  t.teardown(() => demo.stop());
  t.match(demo.stdout(), new RegExp(`Upstream\\s+${ownUrl} \\(yours`), 'the banner names your service');
  const gateway = `http://127.0.0.1:${env.GATEHOUSE_DEMO_PORT}`;
  const { cookie } = await signIn(gateway, { user: 'bob' });
  const response = await fetch(`${gateway}/reports?year=2026`, { headers: { cookie } });
  t.equal(response.status, 200);
  t.equal(await response.text(), 'mine: /reports?year=2026', "your service's answer");
  t.match(seen.at(-1)?.authorization, /^Bearer \S+$/, 'it received a bearer token');
  t.equal(seen.at(-1)?.['x-forwarded-host'], `127.0.0.1:${env.GATEHOUSE_DEMO_PORT}`);
  t.equal((await demo.stop()).code, 0);
});

t.test('--upstream must be an http(s) URL, and belongs to demo only', async (t) => {
  const bad = await runCli(['demo', '--upstream', 'ftp://x'], await demoEnv(), undefined, 60_000);
  t.equal(bad.code, 2);
  t.match(bad.stderr, '--upstream: must be an http(s) URL such as http://127.0.0.1:3000, got "ftp://x"');
  const misplaced = await runCli(['check', '--upstream', 'http://x'], {}, undefined, 60_000);
  t.equal(misplaced.code, 2);
  t.match(misplaced.stderr, '--upstream is an option of gatehouse demo only');
});

t.test('a path the demo upstream has no page for echoes the request, as a page and as JSON', async (t) => {
  const env = await demoEnv();
  const demo = await started(['demo'], env);
  t.teardown(() => demo.stop());
  const gateway = `http://127.0.0.1:${env.GATEHOUSE_DEMO_PORT}`;
  const { cookie } = await signIn(gateway, { user: 'alice', returnTo: '/deep/link?x=1' });
  const api = await fetch(`${gateway}/deep/link?x=1`, { headers: { cookie, accept: 'application/json' } });
  t.equal(api.status, 200, 'not a 404');
  const body = (await api.json()) as Record<string, unknown>;
  t.match(body, { method: 'GET', path: '/deep/link?x=1', sub: 'alice', authorization: /^Bearer …\(\d+ characters, never shown\)$/ });
  t.match(body.forwarded, { 'x-forwarded-proto': 'http', 'x-forwarded-host': `127.0.0.1:${env.GATEHOUSE_DEMO_PORT}` });
  t.notOk(JSON.stringify(body).includes(cookie.split('=')[1]!), 'never the session id');
  const page = await fetch(`${gateway}/deep/link?x=1`, { headers: { cookie, accept: 'text/html' } });
  t.equal(page.status, 200);
  t.match(await page.text(), '<h1>The demo upstream received GET /deep/link?x=1</h1>');
  t.equal((await demo.stop()).code, 0);
});
