import fp from 'fastify-plugin';
import type { UpstreamPass } from '../access/upstream-identity.js';
import type { Route } from '../routing/route-table.js';
import type { DpopKey, SessionRecord } from '../session/store.js';
import type { Site } from '../access/sites.js';
import type { DpopKeys } from '../oauth/dpop.js';

/** What the proxy keeps of one request while it is under way: one object per proxied request. */
export interface Exchange extends UpstreamPass {
  /** The route the request's normalised path matched (README "Routes"). */
  route: Route;
  /** The upstream path (without the query, which reply-from appends), kept for a retry and the failure log. */
  path: string;
  /** When the request was handed to the upstream (hrtime ns), for the latency histogram. */
  startedAt: bigint;
  /** Seconds the upstream took to answer with its head; -1 until it has. */
  seconds: number;
  /** The key of the signed-in user's token record (src/oauth/identify.ts); '' without a user. */
  userKey: string;
  /** The signed-in browser's session (its sign-in's `acr` and `auth_time`: an upstream's step-up challenge, README "Step-up"); null without one. */
  session: SessionRecord | null;
  /** Whether an upstream 401 may be retried once with a new access token (src/plugins/proxy.ts `onResponse`). */
  retryable: boolean;
  /** Whether this request is that retry. */
  retried: boolean;
  /** Whether the request was sent once more with the upstream's DPoP nonce (src/plugins/proxy.ts `retryWithNonce`): never twice. */
  nonceRetried: boolean;
  /** With a DPoP proof: the key it was signed with, for a proof of the same token on a retry with the upstream's nonce. */
  dpopKey: DpopKey | undefined;
  /** With a DPoP proof: the DPoP keys of the user's provider that signed it (they keep the upstreams' nonces too). */
  dpopKeys: DpopKeys | undefined;
  /** Whether this request counts toward its user's `limits.perUserConcurrency` (src/plugins/user-slots.ts). */
  holdsSlot: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A proxied request's state (README "How it works"); null for the gateway's own paths and before a route matched. */
    exchange: Exchange | null;
    /** The signed-in user as shown (the `userIdClaim` value), for the access log. */
    userId: string | undefined;
    /** `bearer` when a machine client's own token admitted the request (README "Machine clients"), for the access log. */
    auth: 'bearer' | undefined;
    /** With `sites`: the site the request's host chose (src/plugins/site-host.ts); null without `sites` (every request is publicUrl's). */
    site: Site | null;
  }
}

/**
 * Declares the request fields the proxy and forward-auth fill in and the
 * access log reads. Always registered, forward-auth-only mode included, so
 * no request ever gains a property at runtime (a shape change on the hot path).
 */
export const requestStatePlugin = fp(
  async (fastify) => {
    fastify.decorateRequest('exchange', null);
    fastify.decorateRequest('userId', undefined);
    fastify.decorateRequest('auth', undefined);
    fastify.decorateRequest('site', null);
  },
  { name: 'gatehouse-request-state', fastify: '5.x' },
);
