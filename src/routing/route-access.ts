import type { FastifyBaseLogger } from 'fastify';
import { isGatehouseError } from '../errors.js';
import type { GatewayContext } from '../plugins/gateway-context.js';
import type { ResolvedSession } from '../session/resolve.js';
import type { TokenRecord } from '../session/store.js';
import { isAllowed } from './allow.js';
import { identityHeaders } from './identity-headers.js';
import type { Route } from './route-table.js';

/**
 * A signed-in user on a required or optional route, as every way in
 * decides it (a proxied request, a WebSocket upgrade, a forward-auth
 * question): README "Routes".
 */
export interface Admission {
  /** The user's token record, its access token fresh. */
  tokens: TokenRecord;
  /** The user as shown: the `userIdClaim` value (logs, the 403 page). */
  user: string;
  /** Whether the route's `allow` lets the user pass; when false nothing goes upstream (403) and the session is kept. */
  allowed: boolean;
  /** The route's identity headers for the user; undefined when the route names none or the user may not pass. */
  identity: Record<string, string> | undefined;
}

/**
 * `allow` and the identity headers for `tokens`, a record already fresh:
 * both read the claims of the last sign-in or refresh, so a refresh that
 * brought new claims decides with them.
 */
export function admit(route: Route, resolved: ResolvedSession, tokens: TokenRecord): Admission {
  const allowed = route.allow === undefined || isAllowed(route.allow, tokens.claims);
  return {
    tokens,
    user: tokens.user ?? resolved.session.userId,
    allowed,
    identity: allowed && route.headers.length > 0 ? identityHeaders(route, tokens.claims) : undefined,
  };
}

/**
 * {@link admit} after making the access token fresh (one refresh per user
 * across replicas, src/oauth/refresh.ts). Null when the AS rejected the
 * refresh on an optional route: the user's sessions are ended and the
 * request goes on without one (SPEC §9). On a required route that rejection
 * throws GH_ERR_SESSION_REQUIRED; an AS or store failure throws its 503.
 */
export async function admitFresh(context: GatewayContext, route: Route, resolved: ResolvedSession, log: FastifyBaseLogger): Promise<Admission | null> {
  let tokens: TokenRecord;
  try {
    tokens = await context.refresher.fresh(resolved.tokens, log);
  } catch (err) {
    if (route.auth === 'optional' && isGatehouseError(err) && err.code === 'GH_ERR_SESSION_REQUIRED') return null;
    throw err;
  }
  return admit(route, resolved, tokens);
}
