import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import cookiePlugin from '@fastify/cookie';
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import { GATEWAY_ROUTE_CLASSES, Metrics } from './metrics/metrics.js';
import { ProviderRegistry } from './oauth/providers.js';
import { TokenRefresher } from './oauth/refresh.js';
import { TargetTokens } from './oauth/target-token.js';
import { PENDING_LOGIN_TTL_MS, PendingLogins } from './oauth/pending-login.js';
import { openBackend } from './session/backends/open.js';
import { Sealer } from './session/seal.js';
import { SessionStore } from './session/store.js';
import { SessionHandles } from './session/handle.js';
import { IdentityAssertions } from './assertion/identity-assertions.js';
import { GatewayCookies } from './http/cookies.js';
import { cutStalledClients } from './http/stalled-clients.js';
import { ClientAddressing, trustFunction } from './http/client-address.js';
import { Sites } from './access/sites.js';
import { Handoffs } from './oauth/handoff.js';
import { handoffRoute } from './routes/handoff.js';
import { siteHostPlugin } from './plugins/site-host.js';
import type { GatewayContext } from './context.js';
import { BearerGate } from './access/bearer.js';
import { BearerVerifier } from './machine/bearer-verifier.js';
import { gatewayContextPlugin } from './plugins/gateway-context.js';
import { requestStatePlugin } from './plugins/request-state.js';
import { ErrorResponse, GatewayLinks, rawErrorResponse } from './http/error-response.js';
import { requestId } from './http/request-id.js';
import { gatehouseError } from './errors.js';
import { createPageRenderer } from './http/page-template.js';
import { errorsPlugin, toGatehouseError } from './plugins/errors.js';
import { accessLogPlugin } from './plugins/access-log.js';
import { proxyPlugin } from './plugins/proxy.js';
import { rateLimitPlugin } from './plugins/rate-limit.js';
import { loginRoute } from './routes/login.js';
import { callbackRoute } from './routes/callback.js';
import { logoutRoute } from './routes/logout.js';
import { sessionRoute } from './routes/session.js';
import { signedOutRoute } from './routes/signed-out.js';
import { backchannelLogoutRoute } from './routes/backchannel-logout.js';
import { forwardAuthRoute } from './routes/forward-auth.js';
import { securityEventsRoute } from './routes/security-events.js';
import { jwksRoute } from './routes/jwks.js';
import { buildAdmin } from './admin/server.js';
import { Readiness } from './admin/readiness.js';
import { systemClock, type Clock } from './clock.js';
import type { Tracing } from './tracing/tracing.js';
import { compileRoutes } from './routing/route-table.js';
import { SIGN_IN_TARGET } from './config/token-targets.js';
import { OpenSockets } from './websocket/open-sockets.js';
import { proxyWebSockets } from './websocket/upgrade.js';
import { withPseudonyms } from './logger.js';
import { createPseudonymizer } from './pseudonym.js';

export interface GatewayOptions {
  logger: Logger;
  /** Directory a relative `sqlite://` path is resolved against. */
  cwd: string;
  /** What tells the time where it decides an outcome; the system clock unless a test passes its own. */
  clock?: Clock;
  /** Started tracing (README, "Tracing"); absent when it is off, and then nothing of it is registered. */
  tracing?: Pick<Tracing, 'plugin'>;
}

/** A built gateway: the public app, the admin app, and what they share. Nothing listens yet. */
export interface Gateway {
  app: FastifyInstance;
  admin: FastifyInstance;
  context: GatewayContext;
  /** What /readyz answers; shutdown turns it false first. */
  readiness: Readiness;
  /** The proxied WebSockets still open; shutdown closes them with 1001 after the grace period. */
  websockets: OpenSockets;
  /** Closes both apps, the provider's retries and the store. */
  close(): Promise<void>;
}

/**
 * Builds the gateway from a validated config: store, provider (discovery is
 * attempted once and retried in the background if the AS is down), the
 * public app with its plugins in a fixed order, and the admin app.
 */
export async function buildGateway(config: Config, options: GatewayOptions): Promise<Gateway> {
  const pseudonymize = createPseudonymizer(config.session.encryptionKeys[0]!);
  const logger = withPseudonyms(options.logger, pseudonymize);
  const clock = options.clock ?? systemClock;
  const sealer = new Sealer(config.session.encryptionKeys);
  const store = new SessionStore(await openBackend(config.session.store, options.cwd, config.session.keyPrefix, { log: logger }), sealer, config.session.cacheSize, clock);
  const providers = new ProviderRegistry(config, logger as FastifyBaseLogger, () => clock.now());
  const routes = compileRoutes(config);
  const clientAddressing = new ClientAddressing(config.server.trustProxy);
  const sites = new Sites(config, clientAddressing.trust, routes);
  const allRoutes = sites.all.flatMap((one) => one.routes.routes);
  const metrics = new Metrics(
    [...GATEWAY_ROUTE_CLASSES, ...(config.forwardAuth.trustedProxies === undefined ? [] : ['forward-auth']), ...new Set(allRoutes.map((route) => route.label))],
    store.countSessions,
    [SIGN_IN_TARGET, ...new Set(sites.all.flatMap((one) => one.routes.targets.map((target) => target.label)))],
    sites.several ? new Map(sites.all.map((one) => [one.name, one.routes.routes.map((route) => route.label)])) : undefined,
  );
  const refresher = new TokenRefresher({
    providers,
    store,
    metrics,
    clock,
    refreshSkewMs: config.tokens.refreshSkew * 1000,
    defaultLifetime: config.tokens.defaultLifetime,
  });
  const publicUrl = config.server.publicUrl.replace(/\/$/, '');
  const site = sites.signIn;
  const basePath = new URL(publicUrl).pathname.replace(/\/$/, '');
  const cookies = new GatewayCookies(config, PENDING_LOGIN_TTL_MS);
  const pages = createPageRenderer(config.pages);
  const links = new GatewayLinks(basePath, config.paths);
  const errorResponse = new ErrorResponse(pages, cookies, links);
  const bearer = allRoutes.some((route) => route.acceptsBearer)
    ? new BearerGate(
        new BearerVerifier({
          settings: config.machineClients,
          provider: providers.default.provider,
          providerUserIdClaim: config.provider.userIdClaim,
          timeoutMs: config.provider.timeout * 1000,
          cacheSize: config.session.cacheSize,
          clock,
        }),
        metrics,
      )
    : undefined;
  const context: GatewayContext = {
    config,
    providers,
    store,
    sessionHandles: new SessionHandles(config.session.encryptionKeys),
    assertions:
      config.assertion.signingKeys === undefined ? undefined : await IdentityAssertions.create(config.assertion.signingKeys, config.assertion.lifetime, publicUrl),
    metrics,
    clock,
    routes,
    refresher,
    targetTokens: new TargetTokens({
      providers,
      refresher,
      store,
      refreshes: metrics.refreshes,
      clock,
      refreshSkewMs: config.tokens.refreshSkew * 1000,
      defaultLifetime: config.tokens.defaultLifetime,
    }),
    pendingLogins: new PendingLogins(sealer, clock),
    pages,
    cookies,
    links,
    errorResponse,
    bearer,
    redirectUri: `${publicUrl}${config.paths.callback}`,
    basePath,
    site,
    sites,
    handoffs: new Handoffs(store, clock),
    crossSite: site.crossSite,
    clientAddressing,
  };
  if (config.server.publicUrl === 'https://app.example.com') {
    logger.warn('server.publicUrl is the example default https://app.example.com: set it to the URL browsers use');
  }
  await providers.start();

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: trustFunction(config.server.trustProxy),
    genReqId: requestId,
    // Fastify's own answer to a URL it cannot decode echoes the path and is cacheable: the gateway's error answer instead.
    frameworkErrors: (error, request, reply) => {
      request.errorCode = 'GH_ERR_REQUEST_INVALID';
      return errorResponse.send(request, reply, toGatehouseError(error));
    },
    // Bytes the HTTP parser refused: the gateway's error answer (431 for an oversized head), then the connection closed.
    clientErrorHandler: answerClientError,
    serverFactory: (handler) => createPublicServer(handler as RequestListener, config.server.maxHeaderSize, config.server.idleTimeout * 1000),
  });
  // First, so that every later hook and route runs inside the request's server span.
  if (options.tracing) await app.register(options.tracing.plugin, { pseudonymize });
  await app.register(gatewayContextPlugin, { context });
  await app.register(requestStatePlugin);
  // Every path the gateway answers itself: another method on one of them gets 405 from the proxy, never the upstream.
  const gatewayPaths = new Set<string>();
  app.addHook('onRoute', (route) => {
    gatewayPaths.add(route.url);
  });
  await app.register(cookiePlugin);
  await app.register(errorsPlugin);
  await app.register(accessLogPlugin, { logger });
  // With `sites`: the request's host picks its site, and a host no site has gets 404 before anything else (README "Several sites").
  if (sites.several) await app.register(siteHostPlugin);
  await app.register(rateLimitPlugin);
  await app.register(loginRoute);
  await app.register(callbackRoute);
  await app.register(logoutRoute);
  await app.register(sessionRoute);
  await app.register(signedOutRoute);
  await app.register(backchannelLogoutRoute);
  await app.register(forwardAuthRoute);
  await app.register(securityEventsRoute);
  await app.register(jwksRoute);
  await app.register(handoffRoute);
  // Forward-auth only: nothing is proxied, so no token ever goes to an upstream from here.
  if (!config.forwardAuth.only) await app.register(proxyPlugin, { gatewayPaths: new Set(gatewayPaths) });

  const websockets = new OpenSockets(store, clock, metrics.websocketConnections, logger, config.server.idleTimeout * 1000);
  if (!config.forwardAuth.only) proxyWebSockets(app.server, context, websockets, logger as FastifyBaseLogger);

  const readiness = new Readiness(providers, store);
  const { token } = config.admin;
  const sessionApi =
    token === undefined
      ? undefined
      : { token, store, providers, handles: context.sessionHandles, userIdClaim: config.provider.userIdClaim, issuer: config.provider.issuer };
  const admin = await buildAdmin(metrics, readiness, logger, sessionApi);
  return {
    app,
    admin,
    context,
    readiness,
    websockets,
    async close() {
      providers.close();
      // The open sockets hold the listener's close: they go first (at once, unless a shutdown already gave them a grace period).
      await Promise.all([websockets.closeAll(0), app.close()]);
      await admin.close();
      await store.close();
    },
  };
}

/**
 * Node's clientError, answered as the gateway answers errors (no-store,
 * nosniff, no part of the request echoed): 431 for a head over
 * `server.maxHeaderSize`, 408 for a request that timed out, else 400.
 */
function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const detail = status === 431 ? 'headers too large' : status === 408 ? 'it took too long to arrive' : 'it cannot be read';
    socket.write(rawErrorResponse(gatehouseError('GH_ERR_REQUEST_INVALID', { detail, status })));
  }
  socket.destroy(err);
}

/**
 * The public listener: request heads over `maxHeaderSize` get 431 from Node's
 * parser, CONNECT (tunnelling, never proxied) is refused (SECURITY.md), and
 * clients stalled for `server.idleTimeout` are cut (README "Limits under abuse").
 */
function createPublicServer(handler: RequestListener, maxHeaderSize: number, idleTimeoutMs: number): Server {
  const server = createServer({ maxHeaderSize }, handler);
  cutStalledClients(server, idleTimeoutMs);
  server.on('connect', (_request, socket) => {
    socket.end('HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  return server;
}
