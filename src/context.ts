import type { Config } from './config/schema.js';
import type { ProviderRegistry } from './oauth/providers.js';
import type { TokenRefresher } from './oauth/refresh.js';
import type { TargetTokens } from './oauth/target-token.js';
import type { PendingLogins } from './oauth/pending-login.js';
import type { SessionStore } from './session/store.js';
import type { SessionHandles } from './session/handle.js';
import type { IdentityAssertions } from './assertion/identity-assertions.js';
import type { GatewayCookies } from './http/cookies.js';
import type { Metrics } from './metrics/metrics.js';
import type { Clock } from './clock.js';
import type { PageRenderer } from './http/page-template.js';
import type { RouteTable } from './routing/route-table.js';
import type { CrossSiteRule } from './http/csrf.js';
import type { ClientAddressing } from './http/client-address.js';
import type { ErrorResponse, GatewayLinks } from './http/error-response.js';
import type { BearerGate } from './access/bearer.js';
import type { Site, Sites } from './access/sites.js';
import type { Handoffs } from './oauth/handoff.js';

export type { Site } from './access/sites.js';

/**
 * Everything the routes, plugins, the WebSocket upgrade and forward-auth
 * share, built once by buildGateway (src/app.ts). It lives at the top of
 * src/ so that no room imports another room's plugin to learn its type.
 */
export interface GatewayContext {
  config: Config;
  /** The identity providers by name (README "Several identity providers"): `default` is the top-level `provider`. */
  providers: ProviderRegistry;
  store: SessionStore;
  /** Pseudonyms of sessions: what the session API lists and ends, an assertion's `sid` (README "Ending sessions"). */
  sessionHandles: SessionHandles;
  /** With `assertion.signingKeys`: the signer of identity assertions and its JWKS (README "Identity assertion"). */
  assertions: IdentityAssertions | undefined;
  refresher: TokenRefresher;
  /** The users' tokens for the routes' token targets (README "A token for each API"). */
  targetTokens: TargetTokens;
  pendingLogins: PendingLogins;
  cookies: GatewayCookies;
  metrics: Metrics;
  /** The gateway's own HTML pages and their CSP (README "Pages"). */
  pages: PageRenderer;
  /** publicUrl + paths.callback: the redirect_uri registered at the AS. */
  redirectUri: string;
  /** Path of publicUrl without a trailing slash ('' at the root): prefix of links the browser follows. */
  basePath: string;
  /** publicUrl's host, the sign-in host (README "Several sites"). */
  site: Site;
  /** Host -> site (README "Several sites"); without `sites`, every request is `site`'s. */
  sites: Sites;
  /** One-time hand-off codes from the sign-in host to a site (README "Several sites"). */
  handoffs: Handoffs;
  /** The cross-site request rule of SECURITY.md (src/http/csrf.ts) for publicUrl's origin, built once; each site has its own (`Site.crossSite`). */
  crossSite: CrossSiteRule;
  /** `server.trustProxy` applied: the client address and the X-Forwarded-For chain (src/http/client-address.ts). */
  clientAddressing: ClientAddressing;
  /** `routes` (or the one-route form), compiled once: which upstream, auth and headers a path gets on publicUrl's host (each site has its own). */
  routes: RouteTable;
  /** What tells the time where it decides an outcome (idle timeout, token expiry). */
  clock: Clock;
  /** The sign-in and sign-out links pages offer, computed once. */
  links: GatewayLinks;
  /** The one renderer of error answers, JSON and pages (src/http/error-response.ts). */
  errorResponse: ErrorResponse;
  /** Machine clients' bearer tokens (README "Machine clients"); undefined when no route accepts `bearer`. */
  bearer: BearerGate | undefined;
}

