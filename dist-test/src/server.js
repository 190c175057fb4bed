import { buildGateway } from './app.js';
/**
 * Builds the gateway and opens its two listeners, each logging one
 * `{"msg":"listening","address":...}` line.
 * @example const gateway = await startGateway(config, { logger, cwd: process.cwd() });
 */
export async function startGateway(config, options) {
    const gateway = await buildGateway(config, options);
    const address = await listen(gateway.app, config.server.host, config.server.port, 'listening');
    const adminAddress = await listen(gateway.admin, config.admin.host, config.admin.port, 'admin listening');
    let stopping;
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
async function listen(app, host, port, message) {
    let logged = false;
    const address = await app.listen({
        host,
        port,
        // Fastify logs one line per interface; the contract is one line carrying the address.
        listenTextResolver: (listening) => {
            if (logged)
                return `${message} also at ${listening}`;
            logged = true;
            return { msg: message, address: listening };
        },
    });
    return address;
}
async function shutdown(gateway, graceMs, logger) {
    gateway.context.shuttingDown = true;
    logger.info({ graceMs }, 'shutting down');
    const server = gateway.app.server;
    const grace = setTimeout(() => {
        logger.warn('shutdown grace period over: closing remaining connections');
        server.closeAllConnections();
    }, graceMs);
    try {
        await gateway.close();
    }
    finally {
        clearTimeout(grace);
    }
    logger.info('stopped');
}
//# sourceMappingURL=server.js.map