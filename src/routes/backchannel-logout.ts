import { sha256Base64url } from '../hash.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { gatehouseError } from '../errors.js';
import { claimedIssuer, CLOCK_SKEW_MS, LOGOUT_TOKEN_MAX_AGE_MS, type LogoutClaims } from '../oauth/logout-token.js';
import { DEFAULT_PROVIDER, type ProviderClient } from '../oauth/providers.js';
import { endSessions, providerLogoutLinkName } from '../session/ending.js';
import { openIdUserKey } from '../oauth/identify.js';

/** A form with one logout token is far smaller; anything larger is refused unread (413). */
const BODY_LIMIT = 64 * 1024;
/** A `jti` must be remembered as long as a token carrying it could still be accepted. */
const JTI_TTL_MS = LOGOUT_TOKEN_MAX_AGE_MS + 2 * CLOCK_SKEW_MS;

/**
 * POST /backchannel-logout (OpenID Connect Back-Channel Logout 1.0): the
 * authorization server tells the gateway that a user's session there ended.
 * The logout token is validated in full (signature against the AS's JWKS,
 * claims, single use of its `jti`), then the sessions it names end: those
 * created with its `sid`, else every session of its `sub`. A server-to-server
 * call: no cookie, no CSRF check; answers 200 (also when nothing matched),
 * 400 `invalid_request` for a bad token.
 */
export async function backchannelLogoutRoute(fastify: FastifyInstance): Promise<void> {
  const { config, providers, store } = fastify.gatehouse;

  // §2.5: the token arrives as application/x-www-form-urlencoded; nothing else is read.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_request, body, done) => {
    done(null, new URLSearchParams(body as string));
  });

  fastify.post(config.paths.backchannelLogout, { config: { routeClass: 'logout' } }, async (request, reply) => {
    // §2.8: the response must not be cached.
    reply.header('cache-control', 'no-store');
    const tokens = request.body instanceof URLSearchParams ? request.body.getAll('logout_token') : [];
    if (tokens.length !== 1 || tokens[0] === '') throw gatehouseError('GH_ERR_LOGOUT_TOKEN_INVALID', { detail: 'the form must carry one logout_token' });
    // One endpoint for every provider: the token's iss picks whose keys verify it; a token whose iss is no
    // provider's (or cannot be read) meets the default provider's checks and fails them (README "Several identity providers").
    const iss = claimedIssuer(tokens[0]!);
    const client = (iss === undefined ? undefined : providers.byIssuer(iss)) ?? providers.default;
    let claims: LogoutClaims;
    try {
      claims = await client.logoutTokens.verify(tokens[0]!);
    } catch (err) {
      request.log.info({ code: (err as { code?: string }).code }, 'logout token refused');
      throw err;
    }
    const jti = sha256Base64url(`${claims.iss} ${claims.jti}`);
    if (!(await store.claimOnce(`jti:${jti}`, JTI_TTL_MS))) throw gatehouseError('GH_ERR_LOGOUT_TOKEN_INVALID', { detail: 'its jti was already used' });
    await endNamedSessions(request, client, claims);
    return reply.code(200).send();
  });

  // Never proxied: another method on this path is refused here rather than sent upstream.
  fastify.route({
    method: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: config.paths.backchannelLogout,
    config: { routeClass: 'logout' },
    handler: async () => {
      throw gatehouseError('GH_ERR_METHOD_NOT_ALLOWED');
    },
  });

  /** §2.7: with a `sid`, the sessions made from that AS session; with only a `sub`, every session of the user. */
  async function endNamedSessions(request: FastifyRequest, client: ProviderClient, claims: LogoutClaims): Promise<void> {
    // The token's iss was checked to be the issuer; with its sub it is the user's record key (src/oauth/identify.ts).
    const bySub = claims.sub === undefined ? null : openIdUserKey(claims.iss, claims.sub);
    const userId = claims.sid === undefined ? bySub : ((await store.getLink(providerLogoutLinkName(client.name, claims.sid))) ?? bySub);
    if (userId === null) {
      request.log.info('back-channel logout names no known session');
      return;
    }
    const sid = claims.sid;
    // Only this provider's sessions: a token of one provider never ends a session made with another.
    const ofThisProvider = async (hash: string) => {
      const session = await store.getSession(hash);
      return session !== null && (session.provider ?? DEFAULT_PROVIDER) === client.name && (sid === undefined || session.sid === sid);
    };
    const result = await endSessions(store, userId, ofThisProvider);
    request.log.info({ userId: result?.record.user ?? userId, sessions: result?.ended ?? 0, bySid: sid !== undefined }, 'back-channel logout');
  }
}
