import t from 'tap';
import { NGINX, proxyMissing, startNginx } from './front-proxy.js';
import { recipeScenario } from './recipe-scenario.js';

/**
 * README "Behind nginx, Caddy, Traefik or Envoy": docs/forward-auth/nginx.conf
 * run by a real nginx (auth_request, error_page 401 to the login path).
 */
t.test("the nginx auth_request recipe, server.trustProxy as the recipe's address list", { skip: proxyMissing(NGINX, 'nginx') }, async (t) => {
  await recipeScenario(t, startNginx, { redirect: false, apiWithoutSession: 302, hidesEndpoint: true });
});
