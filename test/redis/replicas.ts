import { Writable } from 'node:stream';
import type { Test } from 'tap';
import { createClient } from '@keyv/redis';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/logger.js';
import { startGateway, type RunningGateway } from '../../src/server.js';
import { freePort, mergeSections, startHarness, type Harness, type HarnessOptions } from '../helpers/harness.js';
import { startRedis, type RedisServer } from '../helpers/redis.js';
import { approveAtAuthorizationServer, startLogin } from '../helpers/sign-in.js';

/** Several gateways sharing one redis-server and one authorization server, as replicas behind a load balancer. */
export interface Replicas {
  /** The first replica's harness: the AS, the upstream, the config every replica shares. */
  h: Harness;
  redis: RedisServer;
  gateways: RunningGateway[];
  /** Where each replica listens; `urls[0]` is also the shared publicUrl. */
  urls: string[];
  /** A node-redis client for looking at what the gateways stored. */
  inspect: ReturnType<typeof inspector>;
}

/**
 * Starts redis-server, a harness (AS, upstream, replica 0) on it, and
 * `count - 1` more gateways with the same config on ports of their own. All
 * share `server.publicUrl`, `provider.*`, the cookie name and the encryption
 * keys (README "Run several replicas (Redis)"), so a browser may be sent to any of them. Everything is
 * stopped by `t`'s teardown.
 */
export async function startReplicas(t: Test, count = 2, options: HarnessOptions = {}): Promise<Replicas> {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const replicas = await startReplicasOn(t, redis.url, count, options);
  const inspect = inspector(redis.url);
  inspect.on('error', () => undefined);
  await inspect.connect();
  t.teardown(() => (inspect.isOpen ? inspect.destroy() : undefined));
  return { ...replicas, redis, inspect };
}

/** {@link startReplicas} on a store that is already running: a Sentinel set, a Cluster. */
export async function startReplicasOn(t: Test, store: string, count = 2, options: HarnessOptions = {}): Promise<Pick<Replicas, 'h' | 'gateways' | 'urls'>> {
  const h = await startHarness({ ...options, store });
  t.teardown(() => h.close());
  const gateways = [h.gateway];
  for (let i = 1; i < count; i += 1) {
    const document = mergeSections(h.document, { server: { port: await freePort() } });
    const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
    const gateway = await startGateway(loadConfig(document, {}), { logger: createLogger('warn', sink), cwd: h.dir });
    t.teardown(() => gateway.shutdown());
    gateways.push(gateway);
  }
  return { h, gateways, urls: [h.url, ...gateways.slice(1).map((gateway) => gateway.address)] };
}

function inspector(url: string) {
  return createClient({ url, socket: { reconnectStrategy: 100 } });
}

/** The `name=value` pairs of Set-Cookie headers, as a Cookie header. */
export function cookieHeader(setCookie: string[]): string {
  return setCookie.map((line) => line.split(';')[0]!).join('; ');
}

/**
 * Signs `user` in with `/login` on replica `loginAt` and the AS's redirect
 * (to the shared publicUrl's `/callback`) delivered to replica `callbackAt`,
 * as a load balancer might. Returns the callback's answer and its cookies.
 */
export async function signInAcross(loginAt: string, callbackAt: string, user: string) {
  const { loginCookies, authorizationUrl } = await startLogin(loginAt);
  const redirect = await approveAtAuthorizationServer(authorizationUrl, user);
  const callbackPath = `${redirect.pathname}${redirect.search}`;
  const loginCookie = cookieHeader(loginCookies);
  const callback = await get(callbackAt, callbackPath, loginCookie);
  const session = callback.setCookie.find((line) => line.startsWith('session_id=') && !line.startsWith('session_id=;'));
  return { ...callback, callbackPath, loginCookie, cookie: session?.split(';')[0] };
}

/** GET `path` on `base` with `cookie`; status, body text and Set-Cookie. */
export async function get(base: string, path: string, cookie?: string): Promise<{ status: number; body: string; setCookie: string[] }> {
  const response = await fetch(`${base}${path}`, { headers: cookie === undefined ? {} : { cookie }, redirect: 'manual' });
  return { status: response.status, body: await response.text(), setCookie: response.headers.getSetCookie() };
}

/** The value of `gatehouse_active_sessions` on a gateway's admin listener, undefined when absent. */
export async function activeSessions(gateway: RunningGateway): Promise<number | undefined> {
  const text = await (await fetch(`${gateway.adminAddress}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith('gatehouse_active_sessions '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/** Polls `condition` every few ms; resolves to the ms it took, or throws after `timeoutMs`. */
export async function within(what: string, timeoutMs: number, condition: () => Promise<boolean>, intervalMs = 5): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await condition()) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
