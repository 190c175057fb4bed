import type { FastifyBaseLogger } from 'fastify';
import { isGatehouseError } from '../errors.js';
import type { GatewayContext } from '../context.js';
import type { ResolvedSession } from './resolve.js';
import type { TokenRecord } from '../session/store.js';
import { isAllowed } from '../routing/allow.js';
import { identityHeaders } from '../routing/identity-headers.js';
import type { Route } from '../routing/route-table.js';

/**
 * What the gate decided for a signed-in user on a required or optional
 * route. `pass`: the request goes upstream as this user. `forbidden`: the
 * route's `allow` refuses the user (403, nothing upstream, the session kept).
 * A feature that adds a way to refuse (step-up, say) adds its verdict here,
 * and each way in answers it in one place.
 */
export type Verdict = 'pass' | 'forbidden';

/**
 * A signed-in user on a required or optional route, as every way in
 * decides it (a proxied request, a WebSocket upgrade, a forward-auth
 * question): README "Routes".
 */
export interface Admission {
  verdict: Verdict;
  /** The user's token record, its access token fresh. */
  tokens: TokenRecord;
  /** The key of the user's token record (src/oauth/identify.ts). */
  userKey: string;
  /** The user as shown: the `userIdClaim` value (logs, the 403 page). */
  user: string;
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
    verdict: allowed ? 'pass' : 'forbidden',
    tokens,
    userKey: resolved.session.userId,
    user: tokens.user ?? resolved.session.userId,
    identity: allowed && route.headers.length > 0 ? identityHeaders(route, tokens.claims) : undefined,
  };
}

/**
 * {@link admit} after making the access token fresh (one refresh per user
 * across replicas, src/oauth/refresh.ts). Null when the AS rejected the
 * refresh on an optional route: the user's sessions are ended and the
 * request goes on without one (README "Routes"). On a required route that
 * rejection throws GH_ERR_SESSION_REQUIRED; an AS or store failure throws its 503.
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
