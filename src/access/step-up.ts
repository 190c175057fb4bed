import type { FastifyReply, FastifyRequest } from 'fastify';
import { gatehouseError, type GatehouseError } from '../errors.js';
import type { ErrorResponse, GatewayLinks } from '../http/error-response.js';
import { INSUFFICIENT_USER_AUTHENTICATION, stepUpChallenge, stepUpQuery, type StepUpRequirement } from '../oauth/step-up.js';

/**
 * A step-up refusal (README "Step-up"): where the browser signs in again
 * (the login path with `returnTo` and the requirement) and the RFC 9470
 * challenge that names the requirement.
 */
export interface StepUpRefusal {
  /** The sign-in URL: navigations are sent there, API calls get it as `stepUp`. */
  signIn: string;
  /** `WWW-Authenticate`: `Bearer error="insufficient_user_authentication", acr_values="…", max_age=…`. */
  challenge: string;
}

/**
 * The refusal for `requirement`, coming back to `returnTo` (a path of this
 * site, basePath included); `origin` in front for an absolute URL
 * (forward-auth, whose proxy may serve another host).
 */
export function stepUpRefusal(links: GatewayLinks, requirement: StepUpRequirement, returnTo: string, origin = ''): StepUpRefusal {
  return { signIn: `${origin}${links.signIn(returnTo).href}${stepUpQuery(requirement)}`, challenge: stepUpChallenge(requirement) };
}

/**
 * The registry error of a step-up refusal, carrying its challenge: what a
 * WebSocket upgrade's raw 401 sends (src/websocket/upgrade.ts).
 */
export function stepUpError(refusal: StepUpRefusal): GatehouseError & { challenge: string } {
  return Object.assign(gatehouseError('GH_ERR_STEP_UP_REQUIRED'), { challenge: refusal.challenge });
}

/**
 * Answers a step-up refusal: `redirect` (a GET/HEAD navigation) 302 to the
 * sign-in; `page` the "stronger sign-in required" page linking to it; else
 * 401 JSON `{"error":"insufficient_user_authentication","stepUp":"…"}`. The
 * 401s carry the RFC 9470 challenge. Nothing is sent upstream.
 */
export function sendStepUp(
  request: FastifyRequest,
  reply: FastifyReply,
  errorResponse: ErrorResponse,
  refusal: StepUpRefusal,
  answer: 'redirect' | 'page' | 'json',
): FastifyReply {
  reply.header('cache-control', 'no-store');
  if (answer === 'redirect') return reply.redirect(refusal.signIn, 302);
  request.errorCode = 'GH_ERR_STEP_UP_REQUIRED';
  reply.header('www-authenticate', refusal.challenge);
  if (answer === 'page') return errorResponse.send(request, reply, gatehouseError('GH_ERR_STEP_UP_REQUIRED'), { href: refusal.signIn, text: 'Sign in again' });
  return reply
    .code(401)
    .header('x-content-type-options', 'nosniff')
    .type('application/json; charset=utf-8')
    .send({ error: INSUFFICIENT_USER_AUTHENTICATION, stepUp: refusal.signIn });
}
