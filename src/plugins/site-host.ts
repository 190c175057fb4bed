import fp from 'fastify-plugin';
import { gatehouseError } from '../errors.js';

/** The answer to a host no site has: built once, never thrown. */
const SITE_UNKNOWN = gatehouseError('GH_ERR_SITE_UNKNOWN');

/**
 * With `sites` (README "Several sites"): the request's Host (X-Forwarded-Host
 * from a trusted proxy) picks its site, put on `request.site` before any
 * route or the proxy reads it; a host that is neither publicUrl's nor a
 * site's gets 404 and nothing goes upstream. WebSocket upgrades, which
 * Fastify never sees, pick theirs in src/websocket/upgrade.ts.
 */
export const siteHostPlugin = fp(
  async (fastify) => {
    const { sites, errorResponse } = fastify.gatehouse;
    fastify.addHook('onRequest', (request, reply, done) => {
      // Forward-auth is asked by a proxy under its own name: the site is the original request's (src/routes/forward-auth.ts).
      if (request.routeOptions.config.routeClass === 'forward-auth') {
        done();
        return;
      }
      const site = sites.of(request.headers, request.socket.remoteAddress);
      if (site === undefined) {
        request.errorCode = SITE_UNKNOWN.code;
        errorResponse.send(request, reply, SITE_UNKNOWN, undefined);
        return;
      }
      request.site = site;
      done();
    });
  },
  { name: 'gatehouse-site-host', fastify: '5.x', dependencies: ['gatehouse-context', 'gatehouse-request-state'] },
);
