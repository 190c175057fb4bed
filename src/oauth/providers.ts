import type { FastifyBaseLogger } from 'fastify';
import type { Config, ProviderConfig } from '../config/schema.js';
import { DEFAULT_PROVIDER } from '../config/checks/providers.js';
import { gatehouseError } from '../errors.js';
import { Provider } from './provider.js';
import { DpopKeys } from './dpop.js';
import { LogoutTokenVerifier } from './logout-token.js';

export { DEFAULT_PROVIDER };

/**
 * One identity provider of the deployment (README "Several identity
 * providers"): its settings, its discovery and openid-client Configuration
 * (client authentication, PAR), its DPoP keys and its back-channel logout
 * verifier. Built once at start-up by {@link ProviderRegistry}.
 */
export interface ProviderClient {
  /** `default` for the top-level `provider`, else the key of `providers`. */
  readonly name: string;
  readonly settings: ProviderConfig;
  readonly provider: Provider;
  /** With `dpop: true`: the users' DPoP keys at this provider (RFC 9449); otherwise undefined. */
  readonly dpop: DpopKeys | undefined;
  /** Verifies this provider's back-channel logout tokens (its keys, its client id). */
  readonly logoutTokens: LogoutTokenVerifier;
}

/**
 * Name -> provider: `default` (the top-level `provider`) and each entry of
 * `providers`. Every place that talks to an authorization server takes its
 * provider from here, by the name a session, a token record or a pending
 * login recorded (absent: `default`).
 */
export class ProviderRegistry {
  readonly default: ProviderClient;
  /** Every provider, `default` first. */
  readonly all: readonly ProviderClient[];
  /** Whether any provider binds tokens with DPoP: only then can a request need a proof. */
  readonly dpop: boolean;
  readonly #byName: ReadonlyMap<string, ProviderClient>;

  constructor(config: Config, log: FastifyBaseLogger, clock: () => number) {
    const entries: Array<[string, ProviderConfig]> = [[DEFAULT_PROVIDER, config.provider], ...Object.entries(config.providers ?? {})];
    this.all = entries.map(([name, settings]) => {
      const provider = new Provider(settings, name === DEFAULT_PROVIDER ? log : log.child({ provider: name }), name);
      return {
        name,
        settings,
        provider,
        dpop: settings.dpop ? new DpopKeys(provider, config.session.cacheSize) : undefined,
        logoutTokens: new LogoutTokenVerifier(provider, settings.clientId, settings.timeout * 1000, clock),
      };
    });
    this.default = this.all[0]!;
    this.dpop = this.all.some((client) => client.dpop !== undefined);
    this.#byName = new Map(this.all.map((client) => [client.name, client]));
  }

  /** The provider of that name (absent: `default`); undefined for a name not configured. */
  get(name: string | undefined): ProviderClient | undefined {
    return name === undefined ? this.default : this.#byName.get(name);
  }

  /**
   * The provider a session or token record was made with. A record naming a
   * provider no longer configured has nothing to refresh or revoke with: its
   * sessions are over (GH_ERR_SESSION_REQUIRED), never sent to another provider.
   */
  of(record: { provider?: string }): ProviderClient {
    const client = this.get(record.provider);
    if (client === undefined) throw gatehouseError('GH_ERR_SESSION_REQUIRED');
    return client;
  }

  /**
   * The OpenID provider whose issuer is `iss` (a back-channel logout token's
   * claim, before it is verified): the configured issuer, or the one its
   * metadata names once loaded. Undefined when none is.
   */
  byIssuer(iss: string): ProviderClient | undefined {
    return this.all.find((client) => client.settings.issuer !== undefined && (client.settings.issuer === iss || (client.provider.ready && client.provider.configuration.serverMetadata().issuer === iss)));
  }

  /** Readiness: every provider's metadata is loaded. */
  get ready(): boolean {
    return this.all.every((client) => client.provider.ready);
  }

  /** Discovery of every provider at once; each one that fails is retried in the background by itself. */
  async start(): Promise<void> {
    await Promise.all(this.all.map((client) => client.provider.start()));
  }

  close(): void {
    for (const client of this.all) client.provider.close();
  }
}
