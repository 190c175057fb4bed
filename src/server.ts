import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import { buildGateway, type Gateway, type GatewayOptions } from './app.js';

/** A gateway whose listeners are open. */
export interface RunningGateway extends Gateway {
  /** `http://HOST:PORT` of the public listener. */
  address: string;
  adminAddress: string;
  /**
   * Graceful stop (README "Run it"): readiness goes false, the listeners stop
   * accepting, in-flight requests get up to `server.shutdownGrace` to finish,
   * then the store closes.
   */
  shutdown(): Promise<void>;
}

/**
 * Builds the gateway and opens its two listeners, each logging one
 * `{"msg":"listening","address":...}` line.
 * @example const gateway = await startGateway(config, { logger, cwd: process.cwd() });
 */
export async function startGateway(config: Config, options: GatewayOptions): Promise<RunningGateway> {
  const gateway = await buildGateway(config, options);
  let address: string;
  let adminAddress: string;
  try {
    address = await listen(gateway.app, config.server.host, config.server.port, 'listening');
    adminAddress = await listen(gateway.admin, config.admin.host, config.admin.port, 'admin listening');
  } catch (err) {
    // A port in use must not leave the other listener, the store or the discovery retry keeping the process alive.
    await gateway.close();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    ...gateway,
    address,
    adminAddress,
    shutdown() {
      stopping ??= shutdown(gateway, config.server.shutdownGrace * 1000, options.logger);
      return stopping;
    },
  };
}

async function listen(app: FastifyInstance, host: string, port: number, message: string): Promise<string> {
  let logged = false;
  const address = await app.listen({
    host,
    port,
    // Fastify logs one line per interface; the contract is one line carrying the address.
    listenTextResolver: (listening) => {
      if (logged) return `${message} also at ${listening}`;
      logged = true;
      return { msg: message, address: listening } as unknown as string;
    },
  });
  return address;
}

/** How often, while shutting down, connections whose last response has finished are closed. */
const IDLE_SWEEP_MS = 100;

async function shutdown(gateway: Gateway, graceMs: number, logger: Logger): Promise<void> {
  gateway.readiness.shutDown();
  logger.info({ graceMs }, 'shutting down');
  const server = gateway.app.server;
  const grace = setTimeout(() => {
    logger.warn('shutdown grace period over: closing remaining connections');
    server.closeAllConnections();
  }, graceMs);
  // close() ends the connections idle at that moment only: a keep-alive
  // connection whose response finishes later would stay open (Fastify keeps
  // them 72 s) and hold the exit until the grace period is over.
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  // Open WebSockets get the grace period too, then 1001 (README "WebSockets and server-sent events").
  void gateway.websockets.closeAll(graceMs);
  try {
    await gateway.close();
  } finally {
    clearTimeout(grace);
    clearInterval(sweep);
  }
  logger.info('stopped');
}
