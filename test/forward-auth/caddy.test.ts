import t from 'tap';
import { CADDY, proxyMissing, startCaddy } from './front-proxy.js';
import { recipeScenario } from './recipe-scenario.js';

/**
 * README "Behind nginx, Caddy, Traefik or Envoy": docs/forward-auth/Caddyfile
 * run by a real Caddy (forward_auth with copy_headers, forwardAuth.redirect on).
 */
t.test('the Caddy forward_auth recipe, server.trustProxy as a hop count', { skip: proxyMissing(CADDY, 'caddy') }, async (t) => {
  // Caddy is the one hop in front (nginx.test.ts runs the recipe's address list).
  await recipeScenario(t, startCaddy, { redirect: true, apiWithoutSession: 401, hidesEndpoint: false, trustProxy: 1, passesRefusals: true });
});
