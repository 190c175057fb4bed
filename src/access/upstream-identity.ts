import type { IncomingHttpHeaders } from 'node:http';
import type { GatewayContext } from '../context.js';
import type { Site } from './sites.js';
import { endToEndHeaders } from '../http/hop-by-hop.js';
import { isReplacedFromClient, isReplacedFromProxy } from '../http/client-address.js';
import type { ProviderRegistry } from '../oauth/providers.js';
import type { Route } from '../routing/route-table.js';
import type { TargetToken, TokenRecord } from '../session/store.js';
import type { Admission } from './admission.js';
import type { CallerAdmission } from './bearer.js';

/**
 * What the gateway says upstream about one request, whichever way it came
 * in: the route's identity headers for the user, and the token with its
 * DPoP proof. A proxied request's Exchange is one.
 */
export interface UpstreamPass {
  /** The route's identity headers for the signed-in user; undefined without a user or headers. */
  identity: Record<string, string> | undefined;
  /** The access token to send upstream; '' sends none. */
  token: string;
  /** With `provider.dpop`: the DPoP proof sent with it (RFC 9449 §7.1); '' sends the token as Bearer. */
  proof: string;
}

/** Nothing: a public route, or an optional one without a user. */
export const ANONYMOUS: Readonly<UpstreamPass> = Object.freeze({ identity: undefined, token: '', proof: '' });

/**
 * Path- and method-override headers (README "Routes"): Symfony, IIS,
 * Laravel, Rails' Rack::MethodOverride and others route on them, so an
 * upstream behind the gateway would act on another path or method than
 * the one the gateway decided on.
 */
const OVERRIDE_HEADERS = ['x-original-url', 'x-rewrite-url', 'x-original-method', 'x-http-method-override', 'x-http-method', 'x-method-override'];

/**
 * Headers the gateway sets itself on every upstream request: a client's own
 * copy, in any spelling, never passes (X-Forwarded-* from a trusted proxy
 * other than these three still does).
 */
const GATEWAY_SET = ['authorization', 'dpop', 'cookie', 'x-request-id', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host'];

/**
 * A header name as WSGI, CGI and Rack upstreams read it: `_` and `-` are one
 * there (`X_Forwarded_User` and `X-Forwarded-User` both become
 * `HTTP_X_FORWARDED_USER`), so the gateway compares names that way too.
 * Node gives names in lower case already.
 */
export function headerKey(name: string): string {
  return name.includes('_') ? name.replaceAll('_', '-') : name;
}

/**
 * The token the route's upstream receives for an admitted user: the one
 * place that decides it ('' sends none: a `token: none` route). A feature
 * that sends another token (one per API, a machine caller's own) decides
 * it here, and the proxy, the WebSocket upgrade and forward-auth follow.
 */
export function upstreamToken(route: Route, admission: Admission | CallerAdmission): string {
  if (!route.sendsToken) return '';
  // A machine client's own token goes upstream unchanged (README "Machine clients"); no target is minted for it.
  if ('callerToken' in admission) return admission.callerToken;
  // A route with a token target gets its own token, never the sign-in one (README "A token for each API").
  return admission.target === undefined ? admission.tokens.accessToken : admission.target.accessToken;
}

/**
 * With `provider.dpop`, the proof for one request to `target` (RFC 9449
 * §7.1: `htm` its method, `htu` its URL without the query, `ath` the token's
 * hash) with the sign-in access token, or `targetToken` when the route has
 * a token target; '' without DPoP, or for a record from before `dpop` was
 * turned on, whose Bearer token is sent as such until its refresh binds a key.
 */
export function upstreamProof(providers: ProviderRegistry, tokens: TokenRecord, method: string, target: URL, targetToken?: TargetToken): string {
  // The key of the record's own provider (README "Several identity providers").
  const dpop = tokens.dpopKey === undefined ? undefined : providers.get(tokens.provider)?.dpop;
  if (dpop === undefined || tokens.dpopKey === undefined) return '';
  // A target token goes with a proof only when it was issued bound to the key (its grant carried a proof).
  if (targetToken !== undefined) return targetToken.bound === true ? dpop.proof(tokens.dpopKey, method, target, targetToken.accessToken) : '';
  return dpop.proof(tokens.dpopKey, method, target, tokens.accessToken);
}

/**
 * The identity assertion a route's upstream receives for an admitted
 * user of a browser session `hash` (README "Identity assertion"): the one
 * signed already while it is fresh (a string: no promise on the hot path),
 * else a promise of a new one; undefined on a route without `assertion`.
 */
export function upstreamAssertion(
  context: Pick<GatewayContext, 'assertions' | 'sessionHandles'>,
  route: Route,
  hash: string,
  admission: Admission,
  now: number,
): string | Promise<string> | undefined {
  const { assertions } = context;
  if (route.assertion === undefined || assertions === undefined) return undefined;
  const subject = { user: admission.user, claims: admission.tokens.claims };
  const cached = assertions.cached(route.assertion, hash, subject, now);
  if (cached !== undefined) return cached;
  return assertions.sign(route.assertion, hash, { ...subject, sid: context.sessionHandles.of(hash) }, now);
}

/**
 * The route's assertion for an admitted machine client (README "Identity
 * assertion"): signed like a session's, without `sid`, and reused per
 * caller and route until shortly before its `exp`; undefined when the
 * route sends none.
 */
export function callerAssertion(
  context: Pick<GatewayContext, 'assertions'>,
  route: Route,
  admission: CallerAdmission,
  now: number,
): string | Promise<string> | undefined {
  const { assertions } = context;
  if (route.assertion === undefined || assertions === undefined) return undefined;
  const key = `caller ${admission.userKey}`;
  const subject = { user: admission.user, claims: admission.caller.claims };
  return assertions.cached(route.assertion, key, subject, now) ?? assertions.sign(route.assertion, key, subject, now);
}

/** A machine client's identity headers, with the route's assertion when it sends one. */
export async function callerIdentity(
  context: Pick<GatewayContext, 'assertions'>,
  route: Route,
  admission: CallerAdmission,
  now: number,
): Promise<Record<string, string> | undefined> {
  const assertion = callerAssertion(context, route, admission, now);
  return assertion === undefined ? admission.identity : withAssertion(admission.identity, route, await assertion);
}

/** `identity` (a request's own object, or none yet) with the route's assertion header added. */
export function withAssertion(identity: Record<string, string> | undefined, route: Route, jwt: string): Record<string, string> {
  const headers = identity ?? {};
  headers[route.assertion!.header] = jwt;
  return headers;
}

/**
 * The URL a request to `route` goes to: the route's origin (the only host
 * its token may reach, README "Routes") with `path` and `query` set on it,
 * never concatenated, so no path (`//evil.example/x`) can name another host.
 */
export function upstreamUrl(route: Route, path: string, query = '', protocol?: 'ws:' | 'wss:'): URL {
  const url = new URL(route.origin);
  if (protocol !== undefined) url.protocol = protocol;
  url.pathname = path;
  url.search = query;
  return url;
}

/** Sets the Authorization (and DPoP) header for `pass` on `headers`: Bearer, DPoP with its proof, or nothing. */
export function setAuthorization(headers: Record<string, string | string[] | undefined>, pass: UpstreamPass): void {
  if (pass.token === '') return;
  if (pass.proof === '') {
    headers.authorization = `Bearer ${pass.token}`;
  } else {
    // RFC 9449 §7.1: the DPoP scheme and a proof for this method and URL; a browser's own DPoP header never passes.
    headers.authorization = `DPoP ${pass.token}`;
    headers.dpop = pass.proof;
  }
}

/**
 * Which request headers reach an upstream, and the ones the gateway sets:
 * built once per way in from the context. Every way in (the proxy, the
 * WebSocket upgrade, forward-auth) asks it, so "what goes upstream" is
 * written once (README "What the upstream receives").
 */
export class UpstreamHeaders {
  /** Every name removed from an incoming request, in `headerKey` form. */
  readonly #removed: ReadonlySet<string>;
  /** The removal predicate for a request from a trusted proxy, and for any other: built once each (no closure per request). */
  readonly #fromProxy: (name: string) => boolean;
  readonly #fromClient: (name: string) => boolean;
  readonly #context: Pick<GatewayContext, 'clientAddressing' | 'cookies' | 'site'>;

  /**
   * @param alsoRemoved names (lower case) one way in removes besides: the
   * WebSocket handshake's own headers, say.
   */
  constructor(context: Pick<GatewayContext, 'clientAddressing' | 'cookies' | 'site' | 'sites'>, alsoRemoved: Iterable<string> = []) {
    this.#context = context;
    // Every site's identity headers, on every site: no host lets a client choose an identity another host's upstream reads.
    const named = context.sites.all.flatMap((site) => [...site.routes.identityHeaderNames]);
    this.#removed = new Set([...GATEWAY_SET, ...OVERRIDE_HEADERS, ...named, ...alsoRemoved].map(headerKey));
    const removed = this.#removed;
    this.#fromProxy = (name) => {
      const key = headerKey(name);
      return removed.has(key) || isReplacedFromProxy(key);
    };
    this.#fromClient = (name) => {
      const key = headerKey(name);
      return removed.has(key) || isReplacedFromClient(key);
    };
  }

  /** Whether an incoming header of this name never reaches an upstream as the client sent it. */
  removes(name: string): boolean {
    return this.#removed.has(headerKey(name.toLowerCase()));
  }

  /**
   * What the gateway asserts for `pass`: the identity headers and the
   * Authorization (and DPoP). Forward-auth answers with these for the proxy
   * to copy; the proxy and the upgrade set them on the upstream request.
   */
  asserted(pass: UpstreamPass): Record<string, string> {
    const headers: Record<string, string> = pass.identity === undefined ? {} : { ...pass.identity };
    setAuthorization(headers, pass);
    return headers;
  }

  /**
   * The upstream request's headers: the incoming end-to-end headers without
   * every removed one, then the identity headers, the token, `x-request-id`,
   * the browser's cookies without the gateway's own and `x-forwarded-*`
   * (host and proto of the request's site, publicUrl's without `sites`; the client address appended to the
   * trusted chain: `forwardedFor`).
   */
  forUpstream(incoming: IncomingHttpHeaders, peer: string, forwardedFor: string, requestId: string, pass: UpstreamPass, site: Site | null = null): IncomingHttpHeaders {
    const { clientAddressing, cookies } = this.#context;
    site ??= this.#context.site;
    const fromProxy = clientAddressing.trust !== false && clientAddressing.trust(peer, 0);
    const headers = endToEndHeaders(incoming, fromProxy ? this.#fromProxy : this.#fromClient);
    if (pass.identity !== undefined) Object.assign(headers, pass.identity);
    // No token on a `token: none` route, nor without a user on an optional one.
    setAuthorization(headers, pass);
    headers['x-request-id'] = requestId;
    const cookie = incoming.cookie === undefined ? undefined : cookies.stripOwn(incoming.cookie);
    if (cookie !== undefined) headers.cookie = cookie;
    headers['x-forwarded-for'] = forwardedFor;
    headers['x-forwarded-proto'] = site.proto;
    headers['x-forwarded-host'] = site.host;
    return headers;
  }
}
