import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { closeServer, listen } from './listen.js';
import { escapeHtml } from '../http/page-template.js';

import Provider, {
  errors,
  interactionPolicy,
  type Account,
  type AdapterFactory,
  type ClientMetadata,
  type Configuration,
  type ErrorOut,
  type Grant,
  type JWK,
  type KoaContextWithOIDC,
} from 'oidc-provider';

/** A client registered at the demo authorization server. */
export interface DemoClient {
  clientId: string;
  clientSecret?: string;
  redirectUris: string[];
  postLogoutRedirectUris?: string[];
  /** Defaults to `client_secret_basic` when there is a secret, else `none`. */
  authMethod?: 'client_secret_post' | 'client_secret_basic' | 'none' | 'private_key_jwt';
  /** Public keys that verify the client's assertions, for `private_key_jwt` (RFC 7523). */
  jwks?: { keys: JWK[] };
  /** Refuse this client's authorization requests unless pushed first (RFC 9126 §6). */
  requirePushedAuthorization?: boolean;
  /** Refuse this client's token requests without a DPoP proof (RFC 9449 §5.2 `dpop_bound_access_tokens`). */
  dpopBoundAccessTokens?: boolean;
  /**
   * Where the server POSTs logout tokens when a session ends at the server
   * (OpenID Connect Back-Channel Logout 1.0); ID tokens then carry `sid`.
   */
  backchannelLogoutUri?: string;
  /** May use the token-exchange grant (RFC 8693), when the server offers it (`tokenExchange`). */
  tokenExchange?: boolean;
}

/** A resource server the AS issues audience-restricted access tokens for (RFC 8707). */
export interface DemoResourceServer {
  /** The tokens' `aud`; default the resource indicator itself. */
  audience?: string;
  /** Scopes the server offers for it: a client's request is granted these and no others. */
  scopes: string[];
  /** Seconds its tokens live; default the server's access-token TTL. */
  accessTokenTtl?: number;
  /** Accept the indicator in authorization requests but refuse tokens for it with `invalid_target` (a policy change at the AS). */
  refuseTokens?: boolean;
}

/** What a token exchange (RFC 8693) for one `audience` or `resource` yields. */
export interface DemoExchangeTarget {
  /** The exchanged token's `aud`. */
  audience: string;
  /** Scopes it may carry; a request for others is `invalid_scope`. */
  scopes: string[];
  /** Refuse every exchange for it with this OAuth error. */
  refuse?: 'access_denied' | 'unauthorized_client';
}

/** Options of {@link startAuthorizationServer}. */
export interface AuthorizationServerOptions {
  /** Default `127.0.0.1`. */
  host?: string;
  /** Default 0 (ephemeral). */
  port?: number;
  /**
   * Default `http://host:port` once listening. Give it to put a proxy in front:
   * it must be an origin (no path), and every URL the server builds (discovery,
   * login form) then uses it, whatever Host header the proxy forwards.
   */
  issuer?: string;
  clients: DemoClient[];
  /**
   * Seconds, default 60; or oidc-provider's TTL function, asked at every
   * issue (a benchmark gives tokens from a sign-in and from a refresh
   * different lifetimes by `ctx.oidc.params.grant_type`).
   */
  accessTokenTtl?: NonNullable<Configuration['ttl']>['AccessToken'];
  /** Seconds, default one day. */
  refreshTokenTtl?: number;
  /** Default true: a used refresh token is consumed; reusing it fails with `invalid_grant` and revokes the grant. */
  rotateRefreshTokens?: boolean;
  /** Default true: every code exchange issues a refresh token, even without `offline_access`; false: none ever. */
  issueRefreshTokens?: boolean;
  /**
   * Where sessions, grants and tokens are kept. Default: oidc-provider's
   * development store, an LRU of about 1,000 objects, which drops the oldest
   * grants once a few hundred users have signed in.
   */
  adapter?: AdapterFactory;
  /**
   * Default false. True: RP-initiated logout signs the user out of the server
   * at once, without oidc-provider's "Do you want to sign out?" page (the
   * demo: a sign-out button that asks twice looks broken).
   */
  skipLogoutConfirmation?: boolean;
  /** Offer pushed authorization requests (RFC 9126) in the metadata; default false, so clients send plain authorization requests. */
  pushedAuthorization?: boolean;
  /** Require a server-provided nonce in every DPoP proof (RFC 9449 §8); default false. */
  dpopNonces?: boolean;
  /** Support DPoP at all (default true); false: proofs are ignored and every token is a Bearer token. */
  dpop?: boolean;
  /**
   * The domain of the users' email addresses (default example.com): `alice`
   * is `alice@DOMAIN`. A login that holds an @ is its own email address
   * (`bob@corp.test`), so any address can sign in.
   */
  emailDomain?: string;
  /** Claims some users have besides sub, name and email (user -> claims, e.g. `groups`), released with the `profile` scope. */
  extraClaims?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** Services that get tokens for themselves with the client-credentials grant (RFC 6749 §4.4); opaque tokens, introspectable. */
  machineClients?: ReadonlyArray<{ clientId: string; clientSecret: string }>;
  /** Clients besides the built-in resource server that may introspect any token (a gateway checking machine clients' tokens). */
  introspectors?: readonly string[];
  /**
   * Resource indicators (RFC 8707) the server knows: a token asked for with
   * `resource` carries that server's audience and only its scopes. Without
   * it, resource indicators are off.
   */
  resourceServers?: Readonly<Record<string, DemoResourceServer>>;
  /** Offer the token-exchange grant (RFC 8693) for these audiences and resources, to clients with `tokenExchange`. */
  tokenExchange?: Readonly<Record<string, DemoExchangeTarget>>;
  /** Scopes the server knows besides openid, profile, email and offline_access (granted to every client that asks). */
  extraScopes?: readonly string[];
  /**
   * Two sign-in strengths, for step-up (README "Step-up"): the server
   * advertises both `acr` values, its login form asks for a one-time code
   * besides the password (any code counts), and the ID token's `acr` is
   * `secondFactor` when one was given, else `password` (always present: both
   * are the clients' default `acr_values`). A request whose `acr_values` the
   * session's sign-in does not meet shows the login form again, once; what
   * the user then gives stands (acr_values are voluntary).
   */
  signInLevels?: SignInLevels;
}

/** The `acr` values of {@link AuthorizationServerOptions.signInLevels}. */
export interface SignInLevels {
  password: string;
  secondFactor: string;
  /**
   * An authorization server that ignores step-up requests: `acr_values`,
   * `max_age` and `prompt` are dropped from plain (not pushed) authorization
   * requests, so an existing session signs the user in again at once, as
   * strong and as old as it was.
   */
  ignoreStepUp?: boolean;
  /** Put `auth_time` in every ID token (`require_auth_time`), not only when `max_age` was asked for. */
  alwaysAuthTime?: boolean;
}

/** Successful token endpoint grants by type, and failed refreshes. */
export interface GrantCounters {
  authorizationCode: number;
  refreshToken: number;
  refreshTokenErrors: number;
  /** Successful token exchanges (RFC 8693). */
  tokenExchange: number;
  /** Successful grants by the `resource` they asked for (refresh and token exchange), and by exchange `audience`. */
  byTarget: Record<string, number>;
}

/** A running demo authorization server. */
export interface AuthorizationServer {
  /** The issuer. */
  url: string;
  /** Where it actually listens (`http://127.0.0.1:PORT`). */
  listenUrl: string;
  provider: Provider;
  /** Credentials of a resource-server client allowed to introspect every token. */
  introspection: { clientId: string; clientSecret: string };
  /** Live counters, updated as grants happen. */
  grants: GrantCounters;
  /** Successful refresh grants of one user (`sub`) so far. */
  refreshesOf(sub: string): number;
  /** Closes the listener and every open connection. */
  close(): Promise<void>;
}

const DEMO_SCOPES = ['openid', 'profile', 'email', 'offline_access'];
const INTROSPECTION_CLIENT_ID = 'demo-resource-server';
const ONE_DAY = 24 * 60 * 60;

/**
 * Starts a real oidc-provider authorization server on loopback for the demo and
 * the tests: development login form (any login, any password; the login is the
 * `sub`), no consent step, PKCE S256 required, opaque access tokens,
 * introspection, revocation, RP-initiated and back-channel logout.
 *
 * @example
 * const as = await startAuthorizationServer({
 *   clients: [{ clientId: 'gatehouse', clientSecret: 's3cret', redirectUris: ['http://127.0.0.1:8080/callback'] }],
 *   accessTokenTtl: 2,
 * });
 * // ... discover `as.url`, sign in, refresh ...
 * await as.close();
 */
export async function startAuthorizationServer(opts: AuthorizationServerOptions): Promise<AuthorizationServer> {
  const introspection = { clientId: INTROSPECTION_CLIENT_ID, clientSecret: randomBytes(24).toString('base64url') };
  if (opts.clients.some((client) => client.clientId === introspection.clientId)) {
    throw new Error(`client id ${introspection.clientId} is reserved for the introspection client`);
  }
  const server = createServer();
  const listenUrl = await listen(server, opts.host ?? '127.0.0.1', opts.port ?? 0);
  const issuer = opts.issuer ?? listenUrl;
  try {
    const provider = new Provider(issuer, buildConfiguration(opts, introspection));
    if (opts.issuer !== undefined) pinOriginToIssuer(provider, issuer);
    if (opts.signInLevels !== undefined) useSignInLevels(provider, opts.signInLevels);
    if (opts.tokenExchange !== undefined) registerTokenExchange(provider, opts.tokenExchange);
    const { grants, refreshesOf } = countGrants(provider);
    server.on('request', provider.callback());
    return { url: issuer, listenUrl, provider, introspection, grants, refreshesOf, close: () => closeServer(server) };
  } catch (err) {
    await closeServer(server);
    throw err;
  }
}

function buildConfiguration(
  opts: AuthorizationServerOptions,
  introspection: { clientId: string; clientSecret: string },
): Configuration {
  const refreshTokenTtl = opts.refreshTokenTtl ?? ONE_DAY;
  const issueRefreshTokens = opts.issueRefreshTokens ?? true;
  const extraClaimNames = [...new Set(Object.values(opts.extraClaims ?? {}).flatMap((claims) => Object.keys(claims)))];
  const scopes = [...DEMO_SCOPES, ...(opts.extraScopes ?? [])];
  const resourceServers = opts.resourceServers;
  const accessTokenTtl = opts.accessTokenTtl ?? 60;
  return {
    adapter: opts.adapter,
    clients: [
      ...opts.clients.map((client) => ({
        ...clientMetadata(client),
        ...(opts.signInLevels === undefined ? {} : { default_acr_values: [opts.signInLevels.password, opts.signInLevels.secondFactor] }),
        ...(opts.signInLevels?.alwaysAuthTime ? { require_auth_time: true } : {}),
      })),
      resourceServerMetadata(introspection),
      ...(opts.machineClients ?? []).map(machineClientMetadata),
    ],
    jwks: { keys: [generateSigningKey()] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    scopes,
    claims: { openid: ['sub'], profile: ['name', ...extraClaimNames], email: ['email', 'email_verified'] },
    // oidc-provider's default conformIdTokenClaims: when an access token is issued, profile, email and group
    // claims are released through userinfo only (OpenID Connect Core §5.4), as conformant providers do.
    responseTypes: ['code'],
    pkce: { required: () => true },
    findAccount: (_ctx, sub) => account(sub, opts.emailDomain ?? 'example.com', opts.extraClaims?.[sub]),
    renderError,
    loadExistingGrant: (ctx) => grantDemoScopes(ctx, scopes),
    issueRefreshToken: (_ctx, client) => issueRefreshTokens && client.grantTypeAllowed('refresh_token'),
    ...(opts.signInLevels === undefined
      ? {}
      : {
          acrValues: [opts.signInLevels.password, opts.signInLevels.secondFactor],
          interactions: { policy: stepUpPolicy(opts.signInLevels) } as Configuration['interactions'],
        }),
    // oidc-provider consumes a rotated refresh token before it checks the `resource`: a refresh for a
    // resource it then refuses would leave the client without a live refresh token. Such a request is
    // not rotated, as an AS that checks first would behave.
    rotateRefreshToken: (ctx) => (opts.rotateRefreshTokens ?? true) && !refusesTokensFor(resourceServers, ctx.oidc.params?.resource),
    // oidc-provider refuses outgoing requests (back-channel logout tokens) to
    // loopback and private addresses, against SSRF. This server and every
    // client it knows live on loopback, so that guard is dropped here only.
    fetch: (url, init) => globalThis.fetch(url, { ...init, dispatcher: undefined } as RequestInit),
    features: {
      devInteractions: { enabled: true },
      introspection: {
        enabled: true,
        // The resource server may introspect any token; any other client only its own (RFC 7662 §4).
        allowedPolicy: (_ctx, client, token) =>
          client.clientId === introspection.clientId || token.clientId === client.clientId || (opts.introspectors ?? []).includes(client.clientId),
      },
      clientCredentials: { enabled: (opts.machineClients ?? []).length > 0 },
      revocation: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      rpInitiatedLogout: opts.skipLogoutConfirmation ? { enabled: true, logoutSource: signOutAtOnce } : { enabled: true },
      backchannelLogout: { enabled: true },
      pushedAuthorizationRequests: { enabled: opts.pushedAuthorization ?? false },
      dPoP: opts.dpopNonces ? { enabled: true, nonceSecret: randomBytes(32), requireNonce: () => true } : { enabled: opts.dpop ?? true },
      resourceIndicators:
        resourceServers === undefined
          ? { enabled: false }
          : {
              enabled: true,
              // A grant that holds several resources asked for without one (a scopes-only refresh) gets a token for none of them.
              defaultResource: (_ctx, _client, oneOf) => (Array.isArray(oneOf) && oneOf.length > 1 ? undefined : oneOf),
              getResourceServerInfo: (ctx, indicator) => {
                const server = resourceServers[indicator];
                if (server === undefined || (server.refuseTokens && ctx.oidc.route === 'token')) throw new errors.InvalidTarget();
                return {
                  scope: server.scopes.join(' '),
                  audience: server.audience ?? indicator,
                  accessTokenFormat: 'opaque',
                  ...(server.accessTokenTtl === undefined ? {} : { accessTokenTTL: server.accessTokenTtl }),
                };
              },
            },
    },
    ttl: {
      // A resource server's own TTL, when it has one, before the server-wide one.
      AccessToken:
        typeof accessTokenTtl === 'number'
          ? (_ctx, token) => (token as { resourceServer?: { accessTokenTTL?: number } }).resourceServer?.accessTokenTTL ?? accessTokenTtl
          : accessTokenTtl,
      RefreshToken: refreshTokenTtl,
      ClientCredentials: 10 * 60,
      IdToken: 60 * 60,
      Interaction: 10 * 60,
      Session: refreshTokenTtl,
      Grant: refreshTokenTtl,
    },
  };
}

function refusesTokensFor(servers: AuthorizationServerOptions['resourceServers'], resource: unknown): boolean {
  return typeof resource === 'string' && servers?.[resource]?.refuseTokens === true;
}

/**
 * oidc-provider's default interaction policy, plus: a login is asked for
 * again when the request's `acr_values` do not include the session's `acr`
 * (oidc-provider itself only insists on an essential `acr` claim).
 */
function stepUpPolicy(levels: SignInLevels): ReturnType<typeof interactionPolicy.base> {
  const policy = interactionPolicy.base();
  if (levels.ignoreStepUp) return policy;
  policy.get('login')!.checks.add(
    new interactionPolicy.Check('acr_values_not_met', 'the requested authentication context class is not met', (ctx) => {
      const requested = ctx.oidc.params?.acr_values;
      // Asked once: acr_values are voluntary (OpenID Connect Core §3.1.2.1), so what the user then gives stands.
      if (typeof requested !== 'string' || ctx.oidc.session?.accountId === undefined || ctx.oidc.result?.login !== undefined) {
        return interactionPolicy.Check.NO_NEED_TO_PROMPT;
      }
      return requested.split(' ').includes(ctx.oidc.session.acr ?? '') ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT;
    }),
  );
  return policy;
}

const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/;
const STEP_UP_PARAMETERS = ['acr_values', 'max_age', 'prompt'];

/**
 * The login form of {@link SignInLevels}: login, password and an optional
 * one-time code, served in place of oidc-provider's development form (same
 * paths and field names, so a test's form filler drives both).
 */
function useSignInLevels(provider: Provider, levels: SignInLevels): void {
  provider.use(async (ctx, next) => {
    if (levels.ignoreStepUp && ctx.method === 'GET' && ctx.path === '/auth') {
      const query = new URLSearchParams(ctx.querystring);
      for (const name of STEP_UP_PARAMETERS) query.delete(name);
      ctx.querystring = query.toString();
    }
    const interaction = INTERACTION.exec(ctx.path);
    if (interaction === null) return next();
    if (ctx.method === 'GET' && interaction[2] === undefined) {
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      ctx.type = 'html';
      ctx.set('cache-control', 'no-store');
      ctx.body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in</title></head>
<body>
<h1>Sign-in</h1>
<form autocomplete="off" method="post" action="/interaction/${escapeHtml(details.uid)}/login">
<input type="hidden" name="prompt" value="login">
<label>Login <input required type="text" name="login" autofocus></label>
<label>Password <input required type="password" name="password"></label>
<label>One-time code (optional) <input type="text" name="otp"></label>
<button type="submit">Sign-in</button>
</form>
</body></html>`;
      return undefined;
    }
    if (ctx.method === 'POST' && interaction[2] !== undefined) {
      const body = new URLSearchParams(await readBody(ctx.req));
      const accountId = body.get('login') ?? '';
      const secondFactor = (body.get('otp') ?? '').length > 0;
      const returnTo = await provider.interactionResult(
        ctx.req,
        ctx.res,
        { login: { accountId, acr: secondFactor ? levels.secondFactor : levels.password, amr: secondFactor ? ['pwd', 'otp'] : ['pwd'] } },
        { mergeWithLastSubmission: false },
      );
      ctx.status = 303;
      ctx.redirect(returnTo);
      return undefined;
    }
    return next();
  });
}

async function readBody(stream: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function clientMetadata(client: DemoClient): ClientMetadata {
  return {
    client_id: client.clientId,
    client_secret: client.clientSecret,
    redirect_uris: client.redirectUris,
    post_logout_redirect_uris: client.postLogoutRedirectUris ?? [],
    token_endpoint_auth_method: client.authMethod ?? (client.clientSecret === undefined ? 'none' : 'client_secret_basic'),
    grant_types: ['authorization_code', 'refresh_token', ...(client.tokenExchange ? [TOKEN_EXCHANGE] : [])],
    response_types: ['code'],
    ...(client.jwks === undefined ? {} : { jwks: client.jwks }),
    ...(client.requirePushedAuthorization ? { require_pushed_authorization_requests: true } : {}),
    ...(client.dpopBoundAccessTokens ? { dpop_bound_access_tokens: true } : {}),
    ...(client.backchannelLogoutUri === undefined
      ? {}
      : { backchannel_logout_uri: client.backchannelLogoutUri, backchannel_logout_session_required: true }),
  };
}

/** A client that only calls the introspection endpoint: no redirect, no grant. */
function resourceServerMetadata(credentials: { clientId: string; clientSecret: string }): ClientMetadata {
  return {
    client_id: credentials.clientId,
    client_secret: credentials.clientSecret,
    token_endpoint_auth_method: 'client_secret_basic',
    redirect_uris: [],
    response_types: [],
    grant_types: [],
  };
}

/** A service that only asks for tokens for itself (client credentials): no redirect, no user. */
function machineClientMetadata(credentials: { clientId: string; clientSecret: string }): ClientMetadata {
  return {
    client_id: credentials.clientId,
    client_secret: credentials.clientSecret,
    token_endpoint_auth_method: 'client_secret_basic',
    redirect_uris: [],
    response_types: [],
    grant_types: ['client_credentials'],
  };
}

function generateSigningKey(): JWK {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };
}

function account(sub: string, emailDomain: string, extra: Readonly<Record<string, unknown>> = {}): Account {
  const local = sub.includes('@') ? sub.slice(0, sub.indexOf('@')) : sub;
  return {
    accountId: sub,
    claims: () => ({
      sub,
      name: local.charAt(0).toUpperCase() + local.slice(1),
      email: sub.includes('@') ? sub : `${sub}@${emailDomain}`,
      email_verified: true,
      ...extra,
    }),
  };
}

/** A plain error page, so that a test failing at the AS reads the error in the first bytes of the body. */
function renderError(ctx: KoaContextWithOIDC, out: ErrorOut): void {
  ctx.type = 'html';
  ctx.body = `<!doctype html><title>${escapeHtml(out.error)}</title><h1>${escapeHtml(out.error)}</h1><p>${escapeHtml(out.error_description ?? '')}</p>`;
}

/**
 * Every demo client is first-party, so the consent prompt is skipped: the
 * grant found (or created) for this session always holds the demo scopes.
 */
async function grantDemoScopes(ctx: KoaContextWithOIDC, scopes: readonly string[]): Promise<Grant | undefined> {
  const { client, session, provider } = ctx.oidc;
  if (client === undefined || session?.accountId === undefined) return undefined;
  const grantId = ctx.oidc.result?.consent?.grantId ?? session.grantIdFor(client.clientId);
  const grant =
    (grantId === undefined ? undefined : await provider.Grant.find(grantId)) ??
    new provider.Grant({ clientId: client.clientId, accountId: session.accountId });
  grant.addOIDCScope(scopes.join(' '));
  // Every scope a requested resource server offers (RFC 8707); a scope it does not offer is never granted.
  for (const [indicator, server] of Object.entries(ctx.oidc.resourceServers ?? {})) {
    if (server.scope) grant.addResourceScope(indicator, server.scope);
  }
  await grant.save();
  return grant;
}

/**
 * oidc-provider builds its URLs from the request's Host; behind a proxy that
 * rewrites Host they would bypass the proxy, so they are built from the issuer.
 */
function pinOriginToIssuer(provider: Provider, issuer: string): void {
  const { host, pathname, protocol } = new URL(issuer);
  if (pathname !== '/') throw new Error(`issuer must be an origin without a path: ${issuer}`);
  if (protocol === 'https:') provider.proxy = true;
  provider.use((ctx, next) => {
    ctx.req.headers.host = host;
    if (protocol === 'https:') ctx.req.headers['x-forwarded-proto'] = 'https';
    return next();
  });
}

/**
 * oidc-provider's logout page holds a form that carries its CSRF token; this
 * one submits it by itself with `logout=yes` (end the session at the server
 * too, as the default page's "Yes, sign me out" does). Without JavaScript the
 * button is still there.
 */
function signOutAtOnce(ctx: KoaContextWithOIDC, form: string): void {
  ctx.type = 'html';
  ctx.body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Signing out</title></head>
<body>
${form}
<p>Signing out&hellip;</p>
<button type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>
<script>
const form = document.getElementById('op.logoutForm');
const choice = document.createElement('input');
choice.type = 'hidden';
choice.name = 'logout';
choice.value = 'yes';
form.appendChild(choice);
form.submit();
</script>
</body></html>`;
}

function countGrants(provider: Provider): { grants: GrantCounters; refreshesOf(sub: string): number } {
  const grants: GrantCounters = { authorizationCode: 0, refreshToken: 0, refreshTokenErrors: 0, tokenExchange: 0, byTarget: {} };
  const refreshesBySub = new Map<string, number>();
  provider.on('grant.success', (ctx) => {
    const grantType = ctx.oidc.params?.grant_type;
    const target = ctx.oidc.params?.resource ?? ctx.oidc.params?.audience;
    if (typeof target === 'string') grants.byTarget[target] = (grants.byTarget[target] ?? 0) + 1;
    if (grantType === TOKEN_EXCHANGE) grants.tokenExchange += 1;
    if (grantType === 'authorization_code') grants.authorizationCode += 1;
    else if (grantType === 'refresh_token') {
      grants.refreshToken += 1;
      const sub = ctx.oidc.entities.RefreshToken?.accountId;
      if (sub !== undefined) refreshesBySub.set(sub, (refreshesBySub.get(sub) ?? 0) + 1);
    }
  });
  provider.on('grant.error', (ctx) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') grants.refreshTokenErrors += 1;
  });
  return { grants, refreshesOf: (sub) => refreshesBySub.get(sub) ?? 0 };
}

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';

/**
 * The token-exchange grant (RFC 8693 §2), which oidc-provider leaves to the
 * deployment: the subject token is one of this server's access tokens
 * (active, issued to the same client) or an ID token it signed for the
 * client; the answer is an access token for the `audience` (or `resource`)
 * asked for, with that audience and only the scopes it allows.
 */
function registerTokenExchange(provider: Provider, targets: Readonly<Record<string, DemoExchangeTarget>>): void {
  const parameters = ['subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type'];
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    async (ctx: KoaContextWithOIDC) => {
      const params = ctx.oidc.params as Record<string, string | undefined>;
      const client = ctx.oidc.client!;
      if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
        throw new errors.InvalidRequest('only access tokens are issued');
      }
      if (typeof params.subject_token !== 'string') throw new errors.InvalidRequest('subject_token missing');
      let accountId: string;
      let grantId: string | undefined;
      if (params.subject_token_type === ACCESS_TOKEN_TYPE) {
        const subject = await provider.AccessToken.find(params.subject_token);
        if (!subject?.isValid || subject.clientId !== client.clientId) throw new errors.InvalidGrant('subject token is not active');
        accountId = subject.accountId!;
        grantId = subject.grantId;
      } else if (params.subject_token_type === ID_TOKEN_TYPE) {
        const validated = await provider.IdToken.validate(params.subject_token, client).catch(() => undefined);
        if (validated === undefined) throw new errors.InvalidGrant('subject token is not a valid ID token');
        accountId = String(validated.payload.sub);
      } else {
        throw new errors.InvalidRequest('unsupported subject_token_type');
      }
      const key = params.audience ?? params.resource;
      const target = key === undefined ? undefined : targets[key];
      if (key === undefined || target === undefined) throw new errors.InvalidTarget();
      if (target.refuse === 'access_denied') throw new errors.AccessDenied();
      if (target.refuse === 'unauthorized_client') throw new errors.UnauthorizedClient();
      const scope = params.scope === undefined ? target.scopes : params.scope.split(' ');
      if (scope.some((name) => !target.scopes.includes(name))) throw new errors.InvalidScope('scope not allowed for this audience', scope.join(' '));
      // An ID token names no grant: the exchanged token then stands on its own (introspection checks a grant only when there is one).
      const token = new provider.AccessToken({ accountId, client, gty: 'token-exchange', scope: scope.join(' '), grantId: grantId as string });
      token.resourceServer = new provider.ResourceServer(key, { audience: target.audience, scope: target.scopes.join(' '), accessTokenFormat: 'opaque' });
      const value = await token.save();
      ctx.body = { access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: token.expiration, scope: token.scope };
    },
    parameters,
  );
}
