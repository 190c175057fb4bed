import { createServer } from 'node:http';
import Fastify from 'fastify';
import cookiePlugin from '@fastify/cookie';
import { Metrics } from './metrics.js';
import { Provider } from './oauth/provider.js';
import { TokenRefresher } from './oauth/refresh.js';
import { PendingLogins } from './oauth/pending-login.js';
import { openBackend } from './session/backend.js';
import { Sealer } from './session/seal.js';
import { SessionStore } from './session/store.js';
import { GatewayCookies } from './http/cookies.js';
import { contextPlugin } from './plugins/context.js';
import { errorsPlugin } from './plugins/errors.js';
import { proxyPlugin } from './plugins/proxy.js';
import { loginRoute } from './routes/login.js';
import { callbackRoute } from './routes/callback.js';
import { logoutRoute } from './routes/logout.js';
import { sessionRoute } from './routes/session.js';
import { buildAdmin } from './admin/server.js';
/**
 * Builds the gateway from a validated config: store, provider (discovery is
 * attempted once and retried in the background if the AS is down), the
 * public app with its plugins in a fixed order, and the admin app.
 */
export async function buildGateway(config, options) {
    const { logger } = options;
    const sealer = new Sealer(config.session.encryptionKeys);
    const store = new SessionStore(await openBackend(config.session.store, options.cwd), sealer, config.session.cacheSize);
    const provider = new Provider(config.provider, logger);
    const metrics = new Metrics(store.countSessions);
    const publicUrl = config.server.publicUrl.replace(/\/$/, '');
    const context = {
        config,
        provider,
        store,
        metrics,
        refresher: new TokenRefresher({
            provider,
            store,
            metrics,
            refreshSkewMs: config.tokens.refreshSkew * 1000,
            defaultLifetime: config.tokens.defaultLifetime,
        }),
        pendingLogins: new PendingLogins(sealer),
        cookies: new GatewayCookies(config),
        redirectUri: `${publicUrl}${config.paths.callback}`,
        basePath: new URL(publicUrl).pathname.replace(/\/$/, ''),
        shuttingDown: false,
    };
    if (config.server.publicUrl === 'https://app.example.com') {
        logger.warn('server.publicUrl is the example default https://app.example.com: set it to the URL browsers use');
    }
    await provider.start();
    const app = Fastify({
        loggerInstance: logger,
        disableRequestLogging: true,
        trustProxy: config.server.trustProxy,
        serverFactory: (handler) => createPublicServer(handler, config.server.maxHeaderSize),
    });
    await app.register(contextPlugin, { context });
    await app.register(cookiePlugin);
    await app.register(errorsPlugin);
    app.addHook('onResponse', async (request, reply) => {
        const route = request.routeOptions.config.routeClass ?? 'proxy';
        metrics.requests.inc({ route, status: reply.statusCode });
        const query = request.url.indexOf('?');
        request.log.info({ method: request.method, path: query < 0 ? request.url : request.url.slice(0, query), route, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request completed');
    });
    await app.register(loginRoute);
    await app.register(callbackRoute);
    await app.register(logoutRoute);
    await app.register(sessionRoute);
    await app.register(proxyPlugin);
    const admin = await buildAdmin(context, logger);
    return {
        app,
        admin,
        context,
        async close() {
            provider.close();
            await app.close();
            await admin.close();
            await store.close();
        },
    };
}
/**
 * The public listener: request heads over `maxHeaderSize` get 431 from Node's
 * parser, and CONNECT (tunnelling, never proxied) is refused (SPEC §7).
 */
function createPublicServer(handler, maxHeaderSize) {
    const server = createServer({ maxHeaderSize }, handler);
    server.on('connect', (_request, socket) => {
        socket.end('HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    return server;
}
//# sourceMappingURL=app.js.map