import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';
import type { MachineIssuerConfig } from '../config/schema.js';
import { gatehouseError } from '../errors.js';

/**
 * How long an issuer's key set is trusted before it is fetched again, and
 * how long after a fetch an unknown `kid` may cause another: a caller who
 * sends tokens with made-up key ids costs the issuer at most one request a
 * minute (README "Machine clients").
 */
export const JWKS_COOLDOWN_MS = 60_000;
const JWKS_MAX_AGE_MS = 10 * 60_000;

/** Knobs a test turns; the gateway uses the defaults. */
export interface IssuerKeysOptions {
  /** Milliseconds each fetch (discovery, JWKS) may take. */
  timeoutMs: number;
  /** Default {@link JWKS_COOLDOWN_MS}. */
  cooldownMs?: number;
}

/**
 * The verification keys of one `machineClients.issuers` entry: its
 * `jwksUri`, or the `jwks_uri` of its OpenID Connect discovery document
 * (fetched on first use, its `issuer` checked against the configured one,
 * OpenID Connect Discovery 1.0 §4.3). A key set or discovery document that
 * cannot be fetched throws GH_ERR_BEARER_UNAVAILABLE (503), never 401: the
 * token may well be good.
 */
export class IssuerKeys {
  /** The `getKey` jwtVerify is given: one function per issuer, built once. */
  readonly getKey: JWTVerifyGetKey;
  readonly #issuer: MachineIssuerConfig;
  readonly #options: IssuerKeysOptions;
  #keys: JWTVerifyGetKey | undefined;
  #discovering: Promise<JWTVerifyGetKey> | undefined;

  constructor(issuer: MachineIssuerConfig, options: IssuerKeysOptions) {
    this.#issuer = issuer;
    this.#options = options;
    if (issuer.jwksUri !== undefined) this.#keys = this.#remoteSet(issuer.jwksUri);
    this.getKey = async (header, token) => (this.#keys ?? (await this.#discovered()))(header, token);
  }

  #remoteSet(uri: string): JWTVerifyGetKey {
    return createRemoteJWKSet(new URL(uri), {
      cooldownDuration: this.#options.cooldownMs ?? JWKS_COOLDOWN_MS,
      cacheMaxAge: JWKS_MAX_AGE_MS,
      timeoutDuration: this.#options.timeoutMs,
      [customFetch]: fetchKeySet,
    });
  }

  /** The key set named by discovery; one discovery at a time, tried again by the next token after a failure. */
  #discovered(): Promise<JWTVerifyGetKey> {
    this.#discovering ??= this.#discover().then(
      (keys) => {
        this.#keys = keys;
        return keys;
      },
      (err: unknown) => {
        this.#discovering = undefined;
        throw err;
      },
    );
    return this.#discovering;
  }

  async #discover(): Promise<JWTVerifyGetKey> {
    const { issuer } = this.#issuer;
    const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    let metadata: { issuer?: unknown; jwks_uri?: unknown };
    try {
      const response = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(this.#options.timeoutMs), headers: { accept: 'application/json' } });
      if (response.status !== 200) throw new Error(`discovery answered ${response.status}`);
      metadata = (await response.json()) as typeof metadata;
    } catch (err) {
      throw gatehouseError('GH_ERR_BEARER_UNAVAILABLE', { cause: err });
    }
    // A document that names another issuer, or no key set, cannot vouch for this issuer's tokens.
    if (metadata.issuer !== issuer || typeof metadata.jwks_uri !== 'string' || !URL.canParse(metadata.jwks_uri)) {
      throw gatehouseError('GH_ERR_BEARER_UNAVAILABLE', { cause: new Error('the discovery document names another issuer or no jwks_uri') });
    }
    return this.#remoteSet(metadata.jwks_uri);
  }
}

/**
 * fetch for jose's key sets: a request that got no answer (refused,
 * reset, timed out) becomes GH_ERR_BEARER_UNAVAILABLE, so that it is told
 * apart from a token that does not verify.
 */
async function fetchKeySet(url: string, options: RequestInit): Promise<Response> {
  try {
    return await fetch(url, options);
  } catch (err) {
    throw gatehouseError('GH_ERR_BEARER_UNAVAILABLE', { cause: err });
  }
}
