import type { FastifyBaseLogger } from 'fastify';
import { isGatehouseError } from '../errors.js';
import type { GatewayContext } from '../context.js';
import type { ResolvedSession } from './resolve.js';
import type { TargetToken, TokenRecord } from '../session/store.js';
import { isAllowed } from '../routing/allow.js';
import { identityHeaders } from '../routing/identity-headers.js';
import type { Route } from '../routing/route-table.js';
import { meetsStepUp } from '../oauth/step-up.js';

/**
 * What the gate decided for a signed-in user on a required or optional
 * route. `pass`: the request goes upstream as this user. `forbidden`: the
 * route's `allow` refuses the user (403, nothing upstream, the session kept).
 * `step-up`: the user may pass, but the sign-in behind this session is not
 * strong or recent enough for the route's `stepUp` (README "Step-up": sign
 * in again, nothing upstream, the session kept). A feature that adds a way
 * to refuse adds its verdict here, and each way in answers it in one place.
 */
export type Verdict = 'pass' | 'forbidden' | 'step-up';

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
  /**
   * The user's fresh token for the route's token target (README "A token for
   * each API"); undefined on a route without one, or when the user may not pass.
   */
  target: TargetToken | undefined;
}

/**
 * The user as a refusal (the 403 page) names them: the `userIdClaim` value,
 * and, when the route's rule is on the email domain, the email it was
 * decided on, for `sub` is often an opaque id the user cannot recognise
 * (README "Routes").
 * @example refusedUser(route, admission) // '248289761001 (mallory@else.test)'
 */
export function refusedUser(route: Route, admission: Admission): string {
  const email = admission.tokens.claims.email;
  if (route.allow?.emailDomains === undefined || typeof email !== 'string' || email === admission.user) return admission.user;
  return `${admission.user} (${email})`;
}

/**
 * `allow`, the step-up and the identity headers for `tokens`, a record
 * already fresh: `allow` and the headers read the claims of the last sign-in
 * or refresh, so a refresh that brought new claims decides with them; the
 * step-up reads this session's own sign-in (`acr`, `auth_time`), which no
 * refresh changes. A user `allow` refuses is refused before being asked to
 * sign in again for nothing.
 */
export function admit(route: Route, resolved: ResolvedSession, tokens: TokenRecord, now: number, target?: TargetToken): Admission {
  const allowed = route.allow === undefined || isAllowed(route.allow, tokens.claims);
  const steppedUp = route.stepUp === undefined || meetsStepUp(route.stepUp, resolved.session, now);
  return {
    verdict: !allowed ? 'forbidden' : steppedUp ? 'pass' : 'step-up',
    tokens,
    userKey: resolved.session.userId,
    user: tokens.user ?? resolved.session.userId,
    identity: allowed && steppedUp && route.headers.length > 0 ? identityHeaders(route, tokens.claims) : undefined,
    target: allowed && steppedUp ? target : undefined,
  };
}

/**
 * {@link admit} after making the access token fresh (one refresh per user
 * across replicas, src/oauth/refresh.ts), and the route's target token
 * (src/oauth/target-token.ts: GH_ERR_TOKEN_REFUSED when the AS refuses it). Null when the AS rejected the
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
  const admission = admit(route, resolved, tokens, context.clock.now());
  // Only a user who may pass costs a grant (README "A token for each API").
  if (route.target === undefined || admission.verdict !== 'pass') return admission;
  try {
    const grant = await context.targetTokens.fresh(tokens, route.target, log);
    return { ...admission, tokens: grant.record, target: grant.token };
  } catch (err) {
    // A refresh token the AS rejected has ended the session: an optional route goes on without it.
    if (route.auth === 'optional' && isGatehouseError(err) && err.code === 'GH_ERR_SESSION_REQUIRED') return null;
    throw err;
  }
}
