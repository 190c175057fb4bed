import * as oidc from 'openid-client';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import { isLoopbackHost } from '../config/loopback.js';
import { gatehouseError } from '../errors.js';
import { causeCode } from '../failure.js';
import { traceAsCall } from '../tracing/tracing.js';
import { privateKeyJwt } from './client-key.js';

/** How often discovery is retried while the authorization server does not answer (README "Run it": at least every 5 s). */
const DISCOVERY_RETRY_MS = 2000;

/**
 * The openid-client Configuration for the authorization server: discovered
 * from `provider.issuer`, or built from explicit endpoints for a plain OAuth
 * 2.0 server. While discovery has not succeeded, `configuration` throws
 * GH_ERR_PROVIDER_UNAVAILABLE (503) and discovery is retried in the background.
 */
export class Provider {
  readonly #settings: Config['provider'];
  readonly #log: FastifyBaseLogger;
  #configuration: oidc.Configuration | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;
  /** The issuer the provider's metadata names, while it is not the configured one. */
  #announcedIssuer: string | undefined;

  /**
   * @param name the provider's name in the registry (src/oauth/providers.ts): `default` for the top-level `provider`
   */
  constructor(
    settings: Config['provider'],
    log: FastifyBaseLogger,
    readonly name = 'default',
  ) {
    this.#settings = settings;
    this.#log = log;
  }

  /** Whether the server's metadata is loaded (readiness). */
  get ready(): boolean {
    return this.#configuration !== undefined;
  }

  /** Whether the server is an OpenID Connect provider found by discovery (ID tokens are validated and used). */
  get isOpenIdProvider(): boolean {
    return this.#settings.issuer !== undefined;
  }

  /**
   * The loaded configuration; else GH_ERR_PROVIDER_ISSUER_MISMATCH while the
   * provider names another issuer than the config, GH_ERR_PROVIDER_UNAVAILABLE otherwise.
   */
  get configuration(): oidc.Configuration {
    if (this.#configuration) return this.#configuration;
    if (this.#announcedIssuer !== undefined) {
      throw gatehouseError('GH_ERR_PROVIDER_ISSUER_MISMATCH', { detail: issuerMismatch(this.#announcedIssuer, this.#settings.issuer!) });
    }
    throw gatehouseError('GH_ERR_PROVIDER_UNAVAILABLE');
  }

  /**
   * Loads the metadata once; on failure keeps retrying in the background and
   * resolves anyway. An issuer mismatch is a configuration mistake, not an
   * outage: it is logged once, naming both issuers (and again only when the
   * provider's answer changes), while the retries go on quietly in case the
   * provider is what gets fixed.
   */
  async start(): Promise<void> {
    try {
      this.#configuration = await loadConfiguration(this.#settings);
      this.#announcedIssuer = undefined;
      this.#log.info({ issuer: this.#settings.issuer ?? this.#settings.tokenEndpoint }, 'provider metadata loaded');
    } catch (err) {
      const announced = announcedIssuer(err);
      if (announced === undefined) {
        this.#announcedIssuer = undefined;
        this.#log.warn({ failure: describeFailure(err, this.#discoveryUrl()), retryInMs: DISCOVERY_RETRY_MS }, 'provider discovery failed');
      } else if (announced !== this.#announcedIssuer) {
        this.#announcedIssuer = announced;
        this.#log.error(
          { code: 'GH_ERR_PROVIDER_ISSUER_MISMATCH', announced, configured: this.#settings.issuer, problem: issuerMismatch(announced, this.#settings.issuer!) },
          'provider issuer mismatch',
        );
      }
      if (!this.#closed) this.#retry = setTimeout(() => void this.start(), DISCOVERY_RETRY_MS).unref();
    }
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
  }

  /** What start-up fetches: the discovery document (RFC 8414 §3, OpenID Connect Discovery §4), or nothing but the given endpoints. */
  #discoveryUrl(): string {
    const { issuer, tokenEndpoint } = this.#settings;
    return issuer === undefined ? tokenEndpoint! : discoveryUrl(issuer);
  }
}

const ISSUER_CAUSE_DEPTH = 4;

/**
 * The issuer a provider's discovery document names, when discovery failed
 * because it is not the configured one (openid-client:
 * OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED on `issuer`). OpenID Connect
 * Discovery §4.3 and RFC 8414 §3.3 require the two to be identical, so
 * `localhost` against `127.0.0.1`, or a trailing slash, is a mismatch.
 */
export function announcedIssuer(err: unknown): string | undefined {
  // openid-client's ClientError, oauth4webapi's OperationProcessingError, then the comparison's details.
  for (let cause = err, depth = 0; cause !== undefined && cause !== null && depth < ISSUER_CAUSE_DEPTH; depth += 1) {
    const { attribute, body } = cause as { attribute?: unknown; body?: { issuer?: unknown } };
    if (attribute === 'issuer' && typeof body?.issuer === 'string') return body.issuer;
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The one sentence an operator reads for an issuer mismatch, in the log, on the page and from `check --online`. */
export function issuerMismatch(announced: string, configured: string): string {
  return `the provider says its issuer is "${announced}", the config says "${configured}" (provider.issuer must be exactly the provider's)`;
}

/**
 * `gatehouse check --online`: fetches the provider's discovery document once
 * and returns what stops the gateway from using it, one `key: problem` line
 * each (none when it loaded). Without an issuer there is nothing to fetch.
 */
export async function checkDiscovery(settings: Config['provider']): Promise<string[]> {
  if (settings.issuer === undefined) return [];
  try {
    await loadConfiguration(settings);
    return [];
  } catch (err) {
    const announced = announcedIssuer(err);
    if (announced !== undefined) return [`provider.issuer: ${issuerMismatch(announced, settings.issuer)}`];
    const failure = describeFailure(err);
    const why = [failure.code, failure.status === undefined ? undefined : `HTTP ${failure.status}`, failure.error].filter((part) => part !== undefined).join(', ');
    return [`provider.issuer: discovery at ${discoveryUrl(settings.issuer)} failed (${why || String(failure.type)})`];
  }
}

function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** Discovery (RFC 8414 §3, OpenID Connect Discovery §4) or the explicit endpoints of a plain OAuth 2.0 server. */
async function loadConfiguration(settings: Config['provider']): Promise<oidc.Configuration> {
  const clientAuth = clientAuthentication(settings);
  const insecure = usesLoopbackHttp(settings);
  if (settings.issuer !== undefined) {
    const issuer = new URL(settings.issuer);
    return traceAsCall('discovery', () =>
      oidc.discovery(issuer, settings.clientId, undefined, clientAuth, {
        timeout: settings.timeout,
        execute: insecure ? [oidc.allowInsecureRequests, verifyIdTokenSignatures] : [verifyIdTokenSignatures],
      }),
    );
  }
  const configuration = new oidc.Configuration(
    {
      // RFC 8414 requires an issuer; a plain OAuth 2.0 server has none, so its token endpoint's origin stands in.
      issuer: new URL(settings.tokenEndpoint!).origin,
      authorization_endpoint: settings.authorizationEndpoint,
      token_endpoint: settings.tokenEndpoint,
      userinfo_endpoint: settings.userinfoEndpoint,
      revocation_endpoint: settings.revocationEndpoint,
      end_session_endpoint: settings.endSessionEndpoint,
    },
    settings.clientId,
    undefined,
    clientAuth,
  );
  configuration.timeout = settings.timeout;
  configuration[oidc.customFetch] = withoutIdToken(settings.tokenEndpoint!);
  if (insecure) oidc.allowInsecureRequests(configuration);
  return configuration;
}

/**
 * openid-client 6 checks an ID token's claims (iss, aud, exp, nonce, azp) but
 * not its JWS signature unless told: it relies on TLS to the token endpoint.
 * The gateway verifies the signature against the AS's JWKS as well (OpenID
 * Connect Core §3.1.3.7 step 6), since the token's `sub` keys the user's
 * record and its `sid` and `sub` drive back-channel logout
 * (test/callback/id-token-signature.test.ts). An AS that publishes no
 * jwks_uri cannot be verified this way: SECURITY.md says what is checked then.
 */
function verifyIdTokenSignatures(configuration: oidc.Configuration): void {
  if (configuration.serverMetadata().jwks_uri !== undefined) oidc.enableNonRepudiationChecks(configuration);
}

/**
 * Without an issuer there is nothing to validate an ID token against, and
 * README "Configuration" says one is then neither validated nor used: it is removed from
 * token responses before openid-client would try to validate it.
 */
function withoutIdToken(tokenEndpoint: string): oidc.CustomFetch {
  return async (url, options) => {
    const response = await fetch(url, options as RequestInit);
    if (url !== tokenEndpoint) return response;
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return new Response(text, response);
    }
    if (typeof body === 'object' && body !== null && 'id_token' in body) delete (body as { id_token?: unknown }).id_token;
    return new Response(JSON.stringify(body), response);
  };
}

/** The client authentication method of `provider.clientAuthMethod`. */
function clientAuthentication(settings: Config['provider']): oidc.ClientAuth {
  switch (settings.clientAuthMethod) {
    case 'client_secret_basic':
      return oidc.ClientSecretBasic(settings.clientSecret);
    case 'none':
      return oidc.None();
    case 'private_key_jwt':
      return privateKeyJwt(settings.privateKey!, settings.privateKeyId);
    default:
      return oidc.ClientSecretPost(settings.clientSecret);
  }
}

/** openid-client refuses plain http unless told; config validation already limited http to loopback hosts. */
function usesLoopbackHttp(settings: Config['provider']): boolean {
  const urls = [settings.issuer, settings.authorizationEndpoint, settings.tokenEndpoint, settings.userinfoEndpoint, settings.revocationEndpoint];
  return urls.some((url) => url !== undefined && url.startsWith('http:') && isLoopbackHost(new URL(url).hostname));
}

/**
 * A log-safe description of an error from openid-client: its class, code,
 * OAuth error and HTTP status, never its message's free text or the request
 * it carries (which may hold codes or tokens). `code` is the first system
 * error code down the cause chain (fetch wraps ECONNREFUSED, ENOTFOUND,
 * ETIMEDOUT in a TypeError "fetch failed"), so the log says why.
 * `endpoint`, when given, is logged as host and path only: a query string
 * may carry a code or a token (README "Logs").
 */
export function describeFailure(err: unknown, endpoint?: string): Record<string, unknown> {
  const where = endpoint === undefined ? {} : { endpoint: endpointOf(endpoint) };
  if (!(err instanceof Error)) return { type: typeof err, ...where };
  const fields = err as Error & { code?: unknown; error?: unknown; status?: unknown; cause?: unknown };
  const status = typeof fields.status === 'number' ? fields.status : fields.cause instanceof Response ? fields.cause.status : undefined;
  return {
    type: err.name,
    code: causeCode(err),
    error: typeof fields.error === 'string' ? fields.error : undefined,
    status,
    cause: fields.cause instanceof Error && !(fields.cause instanceof Response) ? fields.cause.name : undefined,
    ...where,
  };
}

/** `https://idp.example.com:8443/token?x=1` -> `idp.example.com:8443/token`: no scheme credentials, query or fragment. */
export function endpointOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.host}${parsed.pathname}`;
  } catch {
    return 'unparsable URL';
  }
}

/**
 * How a call to the authorization server failed, for refresh and callback alike:
 * - `rejected`: a definite answer, 4xx except 408 and 429 (OAuth error or
 *   not): the grant or the code is dead (RFC 6749 §5.2);
 * - `unreachable`: no answer worth keeping (network failure, timeout, 5xx,
 *   408, 429): the same call may succeed later;
 * - `unusable`: an answer without an HTTP status to blame that failed
 *   openid-client's checks (an ID token that does not validate, say).
 * A refresh keeps the sessions unless `rejected` (test/refresh/refresh-failures.test.ts);
 * a sign-in is refused unless `unreachable` (test/callback/state-checks.test.ts).
 */
export type ProviderFailure = 'rejected' | 'unreachable' | 'unusable';

export function classifyProviderFailure(err: unknown): ProviderFailure {
  const { status } = describeFailure(err) as { status?: number };
  // fetch reports a network failure as a TypeError, a timeout or abort as a DOMException.
  if (status === undefined) return err instanceof TypeError || err instanceof DOMException ? 'unreachable' : 'unusable';
  return status >= 400 && status < 500 && status !== 408 && status !== 429 ? 'rejected' : 'unreachable';
}
