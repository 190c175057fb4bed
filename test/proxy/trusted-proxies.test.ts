import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { problemsOf, withKeys } from '../config/config-helpers.js';

/**
 * README "Behind nginx, Caddy, Traefik or Envoy", `server.trustProxy`: the
 * client address is the first one from the right of X-Forwarded-For that is
 * not a trusted proxy, so a client never chooses its own by sending the
 * header. Requests come from 127.0.0.2, a second loopback address standing
 * for the proxy, which appends the real client (203.0.113.7) to whatever the
 * client wrote.
 */
const PROXY = '127.0.0.2';
const CLIENT = '203.0.113.7';
const RATE = { max: 3, window: '1m' };

/** /login through the proxy: the client spoofs a new address every time, the proxy appends the real one. */
async function loginThroughProxy(url: string, spoofed: string): Promise<number> {
  const answer = await httpSend(url, { path: '/login', localAddress: PROXY, headers: { 'x-forwarded-for': `${spoofed}, ${CLIENT}` } });
  return answer.status;
}

for (const [name, trustProxy] of [
  ['a hop count', 1],
  ['a CIDR list', ['127.0.0.2/32', '10.0.0.0/8']],
] as const) {
  t.test(`trustProxy as ${name}: a spoofed X-Forwarded-For still rate-limits the real client`, async (t) => {
    const h = await startHarness({ config: { server: { trustProxy }, rateLimit: RATE } });
    t.teardown(() => h.close());
    const statuses: number[] = [];
    for (let n = 1; n <= 5; n += 1) statuses.push(await loginThroughProxy(h.url, `198.51.100.${n}`));
    t.strictSame(statuses, [302, 302, 302, 429, 429], 'the fourth sign-in request of the same client is refused, whatever it claims');

    const other = await httpSend(h.url, { path: '/login', localAddress: PROXY, headers: { 'x-forwarded-for': '203.0.113.8' } });
    t.equal(other.status, 302, 'another client behind the same proxy is not limited');

    const logged = h.logs.filter((line) => line.msg === 'request completed' && line.path === '/login').map((line) => line.client);
    t.strictSame(new Set(logged), new Set([CLIENT, '203.0.113.8']), 'the access log names the real clients, never a spoofed address');
  });
}

t.test('with a CIDR list, a peer outside it is the client, whatever it sends', async (t) => {
  const h = await startHarness({ config: { server: { trustProxy: ['127.0.0.2'] }, rateLimit: RATE } });
  t.teardown(() => h.close());
  const statuses: number[] = [];
  for (let n = 1; n <= 4; n += 1) {
    const answer = await httpSend(h.url, { path: '/login', headers: { 'x-forwarded-for': `198.51.100.${n}`, 'x-real-ip': `198.51.100.${n}` } });
    statuses.push(answer.status);
  }
  t.strictSame(statuses, [302, 302, 302, 429], 'counted under 127.0.0.1, the TCP peer');
});

t.test('what the upstream receives: the trusted part of the chain plus the client; address claims only from a trusted hop', async (t) => {
  const h = await startHarness({ config: { server: { trustProxy: ['127.0.0.2'] } } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const claims = {
    'x-forwarded-for': `198.51.100.1, ${CLIENT}`,
    'x-real-ip': CLIENT,
    'true-client-ip': CLIENT,
    'cf-connecting-ip': CLIENT,
    forwarded: `for=${CLIENT}`,
    'x-forwarded-port': '443',
  };

  const viaProxy = await httpSend(h.url, { path: '/api/headers', localAddress: PROXY, headers: { cookie, ...claims } });
  t.equal(viaProxy.status, 200);
  const fromProxy = JSON.parse(viaProxy.body.toString('utf8')) as Record<string, string>;
  t.equal(fromProxy['x-forwarded-for'], `${CLIENT}, ${PROXY}`, 'the spoofed entry left of the client is dropped; the proxy is appended');
  for (const name of ['x-real-ip', 'true-client-ip', 'cf-connecting-ip', 'forwarded', 'x-forwarded-port']) {
    t.equal(fromProxy[name], claims[name as keyof typeof claims], `${name} from a trusted proxy passes`);
  }

  const direct = await httpSend(h.url, { path: '/api/headers', headers: { cookie, ...claims } });
  t.equal(direct.status, 200);
  const fromClient = JSON.parse(direct.body.toString('utf8')) as Record<string, string>;
  t.equal(fromClient['x-forwarded-for'], '127.0.0.1', 'from an untrusted peer: the peer alone');
  for (const name of ['x-real-ip', 'true-client-ip', 'cf-connecting-ip', 'forwarded', 'x-forwarded-port']) {
    t.notOk(name in fromClient, `${name} from an untrusted peer is removed`);
  }
});

t.test('trustProxy: true is refused, naming the alternatives; malformed entries are named', async (t) => {
  t.strictSame(problemsOf(withKeys({ server: { trustProxy: true } })), [
    "server.trustProxy: true would trust every hop, so any client could choose its own address with X-Forwarded-For; give the number of proxies in front of gatehouse (a hop count such as 1) or the proxies' addresses/CIDRs (such as [10.0.0.0/8])",
  ]);
  t.strictSame(problemsOf(withKeys({ server: { trustProxy: ['10.0.0.0/8', 'proxy.internal', '10.0.0.0/33', '::1/129', 'fd00::/8'] } })), [
    'server.trustProxy[1]: proxy.internal is not an IP address or a CIDR such as 10.0.0.0/8',
    'server.trustProxy[2]: 10.0.0.0/33 is not an IP address or a CIDR such as 10.0.0.0/8',
    'server.trustProxy[3]: ::1/129 is not an IP address or a CIDR such as 10.0.0.0/8',
  ]);
  t.strictSame(problemsOf(withKeys({ server: { trustProxy: 0 } })), [
    "server.trustProxy: must be false, a hop count such as 1, or a list of the proxies' addresses/CIDRs such as [10.0.0.0/8]",
  ]);
});
