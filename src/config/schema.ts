import { Type, type StaticDecode, type TSchema } from '@sinclair/typebox';
import { DURATION_PATTERN, formatDuration, parseDuration } from './duration.js';

/**
 * The one description of gatehouse's configuration: TypeBox yields both the
 * `Config` type and the runtime validation (with defaults) from this schema.
 * `errorMessage` is the sentence an operator reads after the key's path.
 */

const duration = (defaultValue: string) =>
  Type.Transform(
    Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: DURATION_PATTERN })], {
      default: defaultValue,
      errorMessage: 'must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d',
    }),
  )
    .Decode(parseDuration)
    .Encode(formatDuration);

/** A duration without a default: absent unless given. */
const optionalDuration = () =>
  Type.Transform(
    Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: DURATION_PATTERN })], {
      errorMessage: 'must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d',
    }),
  )
    .Decode(parseDuration)
    .Encode(formatDuration);

const text = (defaultValue?: string) =>
  Type.String({ minLength: 1, errorMessage: 'must be a non-empty string', ...(defaultValue === undefined ? {} : { default: defaultValue }) });

const oneOf = <const T extends string[]>(values: T, defaultValue?: T[number]) =>
  Type.Union(
    values.map((value) => Type.Literal(value)),
    { ...(defaultValue === undefined ? {} : { default: defaultValue }), errorMessage: `must be one of: ${values.join(', ')}` },
  ) as unknown as TSchema & { static: T[number] };

const port = (defaultValue: number) =>
  Type.Integer({ minimum: 0, maximum: 65535, default: defaultValue, errorMessage: 'must be a port number (0 to 65535)' });

/** What `server.trustProxy` may be, as an operator reads it after the key. */
export const TRUST_PROXY_FORMS = 'must be false, a hop count such as 1, or a list of the proxies\' addresses/CIDRs such as [10.0.0.0/8]';

/** Logo types a browser shows from a data: URL, by file extension. */
export const LOGO_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};
/** A logo is inlined into every page: keep pages small. */
export const LOGO_MAX_BYTES = 64 * 1024;

const section = <T extends Parameters<typeof Type.Object>[0]>(properties: T) =>
  Type.Object(properties, { additionalProperties: false, default: {}, errorMessage: 'must be a mapping of keys' });

/** An `acr` value: printable ASCII without space, `"` or `\`, so it fits a space-separated `acr_values` and a quoted header value. */
export const ACR_PATTERN = '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$';

const HEADER_NAME = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/** One scope token (RFC 6749 §3.3: printable ASCII without space, `"` or `\\`). */
const scope = () => Type.String({ pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$', errorMessage: 'must be a scope token (no spaces or quotes)' });
const scopeList = () => Type.Array(scope(), { minItems: 1, errorMessage: 'must be a list of scopes' });
/** An RFC 8707 resource indicator; checks.ts requires an absolute URI without a fragment. */
const resource = () => Type.String({ minLength: 1, errorMessage: 'must be an absolute URI such as https://orders.example.com' });

/**
 * A route's own token (README "A token for each API"): a resource indicator
 * (RFC 8707) and/or scopes obtained with the refresh token, or a token
 * exchange (RFC 8693) of the user's sign-in token. Each distinct object is
 * one token target.
 */
const TokenTargetSchema = Type.Object(
  {
    /** What `gatehouse_token_refreshes_total{target}` calls it; default its resource, audience or scopes. */
    name: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._:/@+-]{1,128}$', errorMessage: 'must be 1 to 128 letters, digits or ._:/@+-' })),
    resource: Type.Optional(resource()),
    scopes: Type.Optional(scopeList()),
    exchange: Type.Optional(
      Type.Object(
        {
          audience: Type.Optional(text()),
          resource: Type.Optional(resource()),
          scopes: Type.Optional(scopeList()),
          /** Which of the user's tokens is sent as `subject_token`. */
          subjectToken: oneOf(['access', 'id'], 'access'),
        },
        { additionalProperties: false, errorMessage: 'must be a mapping with audience and/or resource, scopes and subjectToken' },
      ),
    ),
  },
  { additionalProperties: false, errorMessage: 'must be a mapping with resource and/or scopes, or exchange, and an optional name' },
);

export type TokenTargetConfig = StaticDecode<typeof TokenTargetSchema>;

/** One entry of `routes` (README "Routes"): which paths go where, and who may pass. */
const RouteSchema = Type.Object(
  {
    /** A prefix on path-segment boundaries: /api/orders matches /api/orders and /api/orders/7, never /api/ordersx. */
    path: Type.String({ pattern: '^/', errorMessage: 'must be an absolute path such as /api/orders' }),
    /** Origin plus an optional base path: http://orders:8080/v1. */
    upstream: text(),
    /** Whether the route's path is removed before the upstream's base path is put in front. */
    stripPrefix: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
    auth: oneOf(['required', 'optional', 'public'], 'required'),
    /** Default: `access`, and `none` on public routes; an object names a token target of its own (README "A token for each API"). */
    token: Type.Optional(
      Type.Union([Type.Literal('access'), Type.Literal('none'), TokenTargetSchema], {
        errorMessage: 'must be access, none, or a token target (resource and/or scopes, or exchange)',
      }),
    ),
    onUnauthenticated: oneOf(['auto', 'page', '401'], 'auto'),
    /** Identity headers: header name -> claim of the user's ID token or userinfo. */
    headers: Type.Record(Type.String({ pattern: HEADER_NAME }), text(), {
      default: {},
      errorMessage: 'must map header names (letters, digits, dashes) to claim names',
    }),
    allow: Type.Optional(
      Type.Object(
        {
          emailDomains: Type.Optional(Type.Array(text(), { minItems: 1, errorMessage: 'must be a list of domains such as example.com' })),
          /** true: an email without `email_verified` may match `emailDomains` (an explicit false never does). */
          allowUnverifiedEmail: Type.Optional(Type.Boolean({ errorMessage: 'must be true or false' })),
          claims: Type.Optional(
            Type.Record(Type.String({ minLength: 1 }), Type.Array(Type.Union([Type.String(), Type.Number(), Type.Boolean()]), { minItems: 1 }), {
              errorMessage: 'must map claim names to lists of allowed values',
            }),
          ),
        },
        { additionalProperties: false, errorMessage: 'must be a mapping with emailDomains, allowUnverifiedEmail and/or claims' },
      ),
    ),
    /**
     * Step-up (README "Step-up"): the sign-in behind a session must have one
     * of `acr` and/or be at most `maxAge` old, else it is asked for again.
     */
    stepUp: Type.Optional(
      Type.Object(
        {
          /** Acceptable `acr` values, in order of preference (sent as `acr_values`). */
          acr: Type.Optional(
            Type.Array(Type.String({ pattern: ACR_PATTERN, maxLength: 256, errorMessage: 'must be an acr value (no spaces or quotes)' }), {
              minItems: 1,
              maxItems: 10,
              errorMessage: 'must be a list of 1 to 10 acr values such as [urn:example:mfa]',
            }),
          ),
          /** The sign-in (`auth_time`) may be at most this old (sent as `max_age`, with `prompt=login`). */
          maxAge: Type.Optional(optionalDuration()),
        },
        { additionalProperties: false, errorMessage: 'must be a mapping with acr and/or maxAge' },
      ),
    ),
    websocket: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
    /**
     * Who may use the route: `session` (a browser's session cookie), `bearer`
     * (a machine client's own `Authorization: Bearer` token, README "Machine clients").
     */
    accept: Type.Array(oneOf(['session', 'bearer']), {
      default: ['session'],
      minItems: 1,
      uniqueItems: true,
      errorMessage: 'must be a list of session and/or bearer, each at most once',
    }),
    /** A signed identity assertion (JWT) in a header for the upstream to verify (README "Identity assertion"). */
    assertion: Type.Optional(
      Type.Object(
        {
          header: Type.String({ pattern: HEADER_NAME, default: 'X-Gatehouse-Assertion', errorMessage: 'must be a header name such as X-Gatehouse-Assertion' }),
          /** The JWT's `aud`; default the route's upstream origin. */
          audience: Type.Optional(text()),
          /** Claims of the user copied into the JWT when present (besides iss, aud, sub, iat, exp, sid). */
          claims: Type.Array(Type.String({ minLength: 1 }), { default: [], errorMessage: 'must be a list of claim names such as [email, groups]' }),
        },
        { additionalProperties: false, errorMessage: 'must be a mapping with header, audience and/or claims ({} for the defaults)' },
      ),
    ),
    /** Time to the upstream's response head; then 504. */
    timeout: duration('30s'),
  },
  { additionalProperties: false, errorMessage: 'must be a mapping with path, upstream and the route options' },
);

/** One entry of `machineClients.issuers` (README "Machine clients"): whose JWT access tokens a bearer route accepts. */
/**
 * One entry of `sites` (README "Several sites"): a host the gateway serves
 * with its own routes, cookies and CSRF origin; sign-in happens on publicUrl's host.
 */
const SiteSchema = Type.Object(
  {
    /** The host name browsers use (`app.example.com`), optionally with a port; without one, any port matches. The scheme is publicUrl's. */
    host: Type.String({
      pattern: '^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.?(?::[0-9]{1,5})?$|^\\[[0-9A-Fa-f:.]+\\](?::[0-9]{1,5})?$',
      maxLength: 253,
      errorMessage: 'must be a host name such as app.example.com (optionally with :port), without a scheme or path',
    }),
    /** The site's routes (README "Routes"). */
    routes: Type.Array(RouteSchema, { minItems: 1, errorMessage: 'must be a list of routes, each with path and upstream' }),
    /** The provider the site signs in with: a name of `providers`; absent, the top-level `provider`. */
    provider: Type.Optional(Type.String({ minLength: 1, errorMessage: 'must be the name of a provider' })),
  },
  { additionalProperties: false, errorMessage: 'must be a mapping with host and routes (and optionally provider)' },
);

const MachineIssuerSchema = Type.Object(
  {
    /** The JWT's `iss`, compared exactly. */
    issuer: text(),
    /** Where the issuer's keys are; default the `jwks_uri` of its discovery document. */
    jwksUri: Type.Optional(text()),
    /** `aud` must contain one of these. */
    audiences: Type.Array(text(), { minItems: 1, errorMessage: 'must be a list of at least one audience (the aud a token must carry)' }),
    /** The claim that names the caller (logs, identity headers). */
    userIdClaim: text('sub'),
  },
  { additionalProperties: false, errorMessage: 'must be a mapping with issuer, audiences and optionally jwksUri and userIdClaim' },
);

/**
 * How the gateway reaches one authorization server and its client there:
 * `provider` (the registry's `default`) and each entry of `providers`
 * (README "Several identity providers").
 */
const ProviderSchema = section({
  issuer: Type.Optional(text()),
  authorizationEndpoint: Type.Optional(text()),
  tokenEndpoint: Type.Optional(text()),
  userinfoEndpoint: Type.Optional(text()),
  revocationEndpoint: Type.Optional(text()),
  endSessionEndpoint: Type.Optional(text()),
  clientId: text(),
  clientSecret: Type.Optional(text()),
  clientAuthMethod: oneOf(['client_secret_post', 'client_secret_basic', 'none', 'private_key_jwt'], 'client_secret_post'),
  /** PEM (PKCS#8) private key for `private_key_jwt`. */
  privateKey: Type.Optional(text()),
  /** `kid` of `privateKey` as registered at the authorization server. */
  privateKeyId: Type.Optional(text()),
  /** Pushed authorization requests (RFC 9126): `auto` when the metadata offers them, `required` always, `off` never. */
  pushedAuthorization: oneOf(['auto', 'required', 'off'], 'auto'),
  /** DPoP (RFC 9449): tokens bound to a key pair per user, a proof on every token, refresh and upstream request. */
  dpop: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
  scopes: Type.Array(scope(), {
    default: ['openid', 'profile', 'email', 'offline_access'],
    errorMessage: 'must be a list of scopes',
  }),
  userIdClaim: text('sub'),
  /** Where the end-session endpoint sends the browser after logout; default `publicUrl` + `/`. */
  postLogoutRedirectUri: Type.Optional(text()),
  /** Seconds to wait for the authorization server on each request. */
  timeout: duration('10s'),
});

/** The name of an entry of `providers`: what `sites[].provider` names, and sessions record. */
export const PROVIDER_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$';

export const ConfigSchema = Type.Object(
  {
    server: section({
      host: text('0.0.0.0'),
      port: port(8080),
      publicUrl: text('https://app.example.com'),
      /**
       * Which hops in front of gatehouse may say who the client is through
       * X-Forwarded-For: false (none: the TCP peer is the client), how many
       * (a hop count), or which (addresses/CIDRs). `true` is refused by checks.ts.
       */
      trustProxy: Type.Union([Type.Boolean(), Type.Integer({ minimum: 1 }), Type.Array(Type.String(), { minItems: 1 })], {
        default: false,
        errorMessage: TRUST_PROXY_FORMS,
      }),
      shutdownGrace: duration('10s'),
      /**
       * A client that reads nothing of a response waiting for it, or sends
       * nothing of a declared request body, for this long is disconnected and
       * its upstream connection released (0 = never). A response only slow to
       * come from the upstream (long polling, a quiet SSE stream) is not a stall.
       */
      idleTimeout: duration('60s'),
      /** Largest request head (request line and headers) in bytes; larger heads get 431. */
      maxHeaderSize: Type.Integer({ minimum: 1024, default: 16384, errorMessage: 'must be a number of bytes, at least 1024' }),
    }),
    admin: section({
      host: text('127.0.0.1'),
      port: port(9091),
      /** Turns on the session API (README "Ending sessions"): the bearer every call must present, at least 32 characters. */
      token: Type.Optional(text()),
    }),
    provider: ProviderSchema,
    /** Named providers beside `provider` (README "Several identity providers"); `default` is `provider` itself. */
    providers: Type.Optional(
      Type.Record(Type.String(), ProviderSchema, {
        errorMessage: 'must be a mapping of provider names to provider settings',
      }),
    ),
    upstream: text('http://127.0.0.1:3000'),
    /** Several upstreams and per-path auth (README "Routes"); without it every path goes to `upstream` with `auth: required`. */
    routes: Type.Optional(Type.Array(RouteSchema, { minItems: 1, errorMessage: 'must be a list of routes, each with path and upstream' })),
    /** Several hosts in one deployment (README "Several sites"); without it the gateway serves publicUrl's host alone. */
    sites: Type.Optional(Type.Array(SiteSchema, { minItems: 1, errorMessage: 'must be a list of sites, each with host and routes' })),
    session: section({
      cookieName: Type.String({
        pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
        default: 'session_id',
        errorMessage: 'must be a cookie name (letters, digits and !#$%&\'*+-.^_`|~)',
      }),
      cookieSecure: Type.Union([Type.Literal('auto'), Type.Boolean()], { default: 'auto', errorMessage: 'must be auto, true or false' }),
      cookieSameSite: oneOf(['lax', 'strict', 'none'], 'lax'),
      cookieMaxAge: duration('24h'),
      ttl: duration('24h'),
      /**
       * Sliding idle limit: a session not used for this long ends (0 = off).
       * The last use is written to the store at most every tenth of it, so a
       * session ends between 90% and 100% of idleTimeout after its last request.
       */
      idleTimeout: duration('0'),
      store: text('sqlite://./data/gatehouse.sqlite'),
      /** Prefix of every Redis key and of the invalidation channel: gateways that share one Redis need different ones. */
      keyPrefix: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$', default: 'gatehouse', errorMessage: 'must be 1 to 64 letters, digits, dots, dashes or underscores' }),
      cacheSize: Type.Integer({ minimum: 1, default: 10000, errorMessage: 'must be a positive whole number' }),
      encryptionKeys: Type.Array(text(), {
        minItems: 1,
        default: ['${GATEHOUSE_SESSION_KEY}'],
        errorMessage: 'must be a list of at least one base64 key',
      }),
    }),
    tokens: section({
      refreshSkew: duration('30s'),
      defaultLifetime: duration('5m'),
    }),
    paths: section({
      login: text('/login'),
      callback: text('/callback'),
      logout: text('/logout'),
      session: text('/session'),
      /** The page that says "you are signed out"; point provider.postLogoutRedirectUri at it. */
      signedOut: text('/signed-out'),
      /** OpenID Connect Back-Channel Logout 1.0: where the authorization server POSTs logout tokens. */
      backchannelLogout: text('/backchannel-logout'),
      /** Forward-auth: where a reverse proxy asks "may this request pass, and as whom?" (only with forwardAuth.trustedProxies). */
      forwardAuth: text('/forward-auth'),
      /** The public keys of assertion.signingKeys (only with them). */
      jwks: text('/.well-known/jwks.json'),
      /** Where an identity provider pushes Security Event Tokens (RFC 8935; only with securityEvents). */
      securityEvents: text('/security-events'),
      /** With `sites`: where a site takes the one-time code the sign-in host sends the browser with (README "Several sites"). */
      handoff: text('/.gatehouse/handoff'),
    }),
    forwardAuth: section({
      /**
       * The proxies (addresses/CIDRs) that may ask `paths.forwardAuth`; no
       * default: unset, the endpoint does not exist. Any other source gets 404,
       * so a browser can never read a token from it.
       */
      trustedProxies: Type.Optional(Type.Array(Type.String(), { minItems: 1, errorMessage: 'must be a list of proxy addresses/CIDRs such as [10.0.0.0/8]' })),
      /** A navigation without a session gets 302 to sign-in instead of 401 (for proxies that pass the answer on: Caddy, Traefik). */
      redirect: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
      /**
       * Forward-auth only: the gateway proxies nothing (no request, no
       * WebSocket, no token ever leaves for an upstream); every path that is
       * not its own gets 404. `routes` still decide what the endpoint answers.
       */
      only: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
    }),
    csrf: section({
      /** Origins besides publicUrl's that may send unsafe requests (an SPA served elsewhere). */
      allowedOrigins: Type.Array(Type.String(), { default: [] }),
      /** When set, unsafe requests must carry this header (e.g. X-Requested-With). */
      requiredHeader: Type.Optional(
        Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", errorMessage: 'must be a header name such as X-Requested-With' }),
      ),
    }),
    pages: section({
      /** A directory of templates replacing the built-in one: `page.html` for every page, `<page>.html` for one (README "Pages"). */
      dir: Type.Optional(text()),
      /** Shown in every page's header and title. */
      productName: text('gatehouse'),
      /** An image file (PNG, SVG, JPEG, GIF, WebP; at most 64 KiB) inlined into every page. */
      logo: Type.Optional(text()),
    }),
    limits: section({
      /**
       * Proxied requests of one user in flight at once (0 = no limit); more get
       * 429 with Retry-After. Event streams stop counting once their head is sent.
       */
      perUserConcurrency: Type.Integer({ minimum: 0, default: 64, errorMessage: 'must be a whole number of requests (0 = no limit)' }),
      /**
       * The largest WebSocket message, in bytes, either way: the relay holds a
       * message whole, so a larger one closes its socket with 1009 instead of
       * filling the gateway's memory. No "no limit".
       */
      websocketMessageBytes: Type.Integer({ minimum: 1, default: 16 * 1024 * 1024, errorMessage: 'must be a whole number of bytes (at least 1)' }),
      /**
       * Connections to one upstream origin at once (0 = no cap): a cap is a
       * pool that stalled clients of a few users can fill, so only for an
       * upstream that cannot take more.
       */
      upstreamConnections: Type.Integer({ minimum: 0, default: 0, errorMessage: 'must be a whole number of connections (0 = no cap)' }),
    }),
    /** Machine clients' own bearer tokens on routes with `accept: [bearer]` (README "Machine clients"). */
    machineClients: section({
      issuers: Type.Array(MachineIssuerSchema, { default: [], errorMessage: 'must be a list of issuers' }),
      /** Tokens no issuer claims are checked at the provider's introspection endpoint (RFC 7662), as the gateway's client. */
      introspection: Type.Boolean({ default: false, errorMessage: 'must be true or false' }),
      /** How long a verified token's answer is reused (never past its exp); 0 = every request is checked again. */
      cacheTtl: duration('60s'),
    }),
    rateLimit: section({
      /** Requests one client address may make to the login path, and as many to the callback path, per `window`; 0 turns the limit off. */
      max: Type.Integer({ minimum: 0, default: 60, errorMessage: 'must be a whole number of requests (0 = no limit)' }),
      window: duration('1m'),
    }),
    /** Identity assertions (README "Identity assertion"): the keys that sign them and how long each is valid. */
    assertion: section({
      /** PKCS#8 PEM private keys, EC P-256 (ES256) or Ed25519 (EdDSA): the first signs, all are published at paths.jwks. */
      signingKeys: Type.Optional(Type.Array(text(), { minItems: 1, errorMessage: 'must be a list of PKCS#8 PEM private keys' })),
      lifetime: duration('5m'),
    }),
    /** OpenID Shared Signals (README "Ending sessions"): an identity provider's transmitter that may end users' sessions. */
    securityEvents: section({
      /** The transmitter's `iss`, exactly. */
      issuer: Type.Optional(text()),
      /** The `aud` the transmitter gives this receiver. */
      audience: Type.Optional(text()),
      /** Where the transmitter's signing keys are published. */
      jwksUri: Type.Optional(text()),
    }),
  },
  { additionalProperties: false },
);

/** The validated configuration, durations in seconds. */
export type Config = StaticDecode<typeof ConfigSchema>;
export type RouteConfig = StaticDecode<typeof RouteSchema>;
export type SiteConfig = StaticDecode<typeof SiteSchema>;
export type MachineIssuerConfig = StaticDecode<typeof MachineIssuerSchema>;
export type ProviderConfig = StaticDecode<typeof ProviderSchema>;

/** Keys of a provider (`provider` and each entry of `providers`) whose values are secret. */
export const PROVIDER_SECRET_KEYS = ['clientSecret', 'privateKey'] as const;

/** Paths of secret values, shown as `[redacted]` by `gatehouse check`. */
export const SECRET_KEYS = ['provider.clientSecret', 'provider.privateKey', 'session.encryptionKeys', 'admin.token', 'assertion.signingKeys'] as const;

/**
 * Whether cookies carry the Secure attribute, resolving `session.cookieSecure: auto` from publicUrl.
 * @example cookieIsSecure(config) // true for publicUrl https://app.example.com
 */
export function cookieIsSecure(config: Config): boolean {
  const setting = config.session.cookieSecure;
  return setting === 'auto' ? config.server.publicUrl.startsWith('https:') : setting;
}
