import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatehouseError } from '../errors.js';
import { sha256Base64url } from '../hash.js';
import { openIdUserKey } from '../oauth/identify.js';
import { endEverySession } from '../oauth/revocation.js';
import { SET_CLOCK_SKEW_MS, SET_MAX_AGE_MS, SecurityEventVerifier, SetRejection, type EventSubject } from '../oauth/security-event.js';
import { emailLinkName } from '../session/user-links.js';

const CONTENT_TYPE = 'application/secevent+jwt';
const BODY_LIMIT = 64 * 1024;
/** A `jti` is remembered as long as a SET carrying it could still be accepted. */
const JTI_TTL_MS = SET_MAX_AGE_MS + 2 * SET_CLOCK_SKEW_MS;
/** A body of another type: answered 400 invalid_request (RFC 8935 §2.3), never 415. */
const WRONG_TYPE = Symbol('wrong content type');

/**
 * POST /security-events (README "Ending sessions"): an identity provider's
 * OpenID Shared Signals transmitter pushes Security Event Tokens here
 * (RFC 8935 push delivery). A SET that passes every check
 * (src/oauth/security-event.ts) and whose `jti` no replica has seen ends
 * every session of the user it names, on every replica, and revokes the
 * refresh token, as `DELETE /sessions?user=` does; 202. Anything else is
 * 400 with RFC 8935's `{"err", "description"}` and ends nothing. Registered
 * only with `securityEvents.issuer`, `audience` and `jwksUri`.
 */
export async function securityEventsRoute(fastify: FastifyInstance): Promise<void> {
  const { config, providers, store } = fastify.gatehouse;
  const { issuer, audience, jwksUri } = config.securityEvents;
  if (issuer === undefined || audience === undefined || jwksUri === undefined) return;
  const verifier = new SecurityEventVerifier({ issuer, audience, jwksUri }, config.provider.timeout * 1000);
  const path = config.paths.securityEvents;

  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser(CONTENT_TYPE, { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_request, body, done) => done(null, body));
  fastify.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume();
    done(null, WRONG_TYPE);
  });

  fastify.post(path, { config: { routeClass: 'logout' } }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    if (typeof request.body !== 'string') return refuse(request, reply, new SetRejection('invalid_request', `the body must be a SET sent as ${CONTENT_TYPE}`));
    let event;
    try {
      event = await verifier.verify(request.body.trim(), fastify.gatehouse.clock.now());
    } catch (err) {
      if (err instanceof SetRejection) return refuse(request, reply, err);
      throw err;
    }
    // Only now, with every other check passed, is the jti used up, on every replica at once.
    if (!(await store.claimOnce(`set:${sha256Base64url(`${event.iss} ${event.jti}`)}`, JTI_TTL_MS))) {
      return refuse(request, reply, new SetRejection('invalid_request', 'its jti was already received'));
    }
    for (const { event: name, subject } of event.endings) {
      const users = await recordKeys(subject);
      let ended = 0;
      for (const userId of users) ended += (await endEverySession(store, providers, userId, request.log))?.ended ?? 0;
      request.log.info({ event: name, subjectFormat: subject.format, users: users.length, sessions: ended }, 'security event received');
    }
    if (event.ignored > 0) request.log.info({ events: event.ignored }, 'security events accepted without action');
    return reply.code(202).send();
  });

  // Never proxied: another method on this path is refused here rather than sent upstream.
  fastify.route({
    method: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: path,
    config: { routeClass: 'logout' },
    handler: async () => {
      throw gatehouseError('GH_ERR_METHOD_NOT_ALLOWED');
    },
  });

  /**
   * The record keys a subject names: an `iss_sub` is the record key itself
   * (src/oauth/identify.ts); an `email` is the link written at sign-in for
   * the user who last signed in with that address.
   */
  async function recordKeys(subject: EventSubject): Promise<string[]> {
    if (subject.format === 'iss_sub') return [openIdUserKey(subject.iss, subject.sub)];
    const linked = await store.getLink(emailLinkName(subject.email));
    return linked === null ? [] : [linked];
  }
}

function refuse(request: FastifyRequest, reply: FastifyReply, rejection: SetRejection): FastifyReply {
  request.log.info({ setError: rejection.err, description: rejection.description }, 'security event refused');
  return reply.code(400).type('application/json').send({ err: rejection.err, description: rejection.description });
}
