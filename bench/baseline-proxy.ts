/**
 * The baseline: a bare @fastify/http-proxy in front of the bench upstream,
 * no authentication, no logger, run as its own process (pinned to the same
 * core as the gateway). It registers the proxy with the same undici options
 * as the gateway's proxy plugin (src/plugins/proxy.ts), so the comparison
 * measures what gatehouse adds, not a different connection pool.
 *
 * Usage: node dist-bench/bench/baseline-proxy.js UPSTREAM_URL -> prints `{"port":N}`.
 */
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';
import type { AddressInfo } from 'node:net';

/** Copied from src/plugins/proxy.ts: keep the two in step. */
const GATEWAY_UNDICI_OPTIONS = {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  tls: { rejectUnauthorized: true },
};

async function main(): Promise<void> {
  const upstream = process.argv[2];
  if (upstream === undefined) throw new Error('usage: baseline-proxy.js UPSTREAM_URL');
  const app = Fastify({ logger: false });
  await app.register(httpProxy, {
    upstream,
    prefix: '/',
    disableRequestLogging: true,
    undici: GATEWAY_UNDICI_OPTIONS,
  } as unknown as Parameters<typeof httpProxy>[1]);
  await app.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`${JSON.stringify({ port: (app.server.address() as AddressInfo).port })}\n`);
  process.once('SIGTERM', () => {
    void app.close();
    app.server.closeAllConnections();
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`baseline proxy: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
