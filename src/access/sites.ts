import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../config/schema.js';
import { compileRoutes, type RouteTable } from '../routing/route-table.js';
import { createCrossSiteRule, type CrossSiteRule } from '../http/csrf.js';
import type { TrustFunction } from '../http/client-address.js';
import { DEFAULT_PROVIDER } from '../config/checks/providers.js';

/**
 * A host the gateway serves (README "Several sites"): publicUrl's, the
 * sign-in host, or an entry of `sites`. Built once at start-up; a request
 * finds its own through {@link Sites.of}.
 */
export interface Site {
  /** The host as configured, lower case (`app.example.com`; publicUrl's host for the sign-in host): the metrics label `site`. */
  name: string;
  /** The provider the site signs in with: a name of `providers`, `default` for the top-level `provider`. */
  provider: string;
  /** `https://app.example.com[:port]`: the site's own origin (CSRF, the hand-off, `returnTo`). */
  origin: string;
  /** `app.example.com[:port]`, sent upstream as X-Forwarded-Host. */
  host: string;
  /** `https` or `http` (publicUrl's scheme), sent upstream as X-Forwarded-Proto. */
  proto: string;
  /** The site's origin and csrf.allowedOrigins: who may send unsafe requests and open WebSockets. */
  allowedOrigins: ReadonlySet<string>;
  /** The cross-site request rule with this site's origin (src/http/csrf.ts). */
  crossSite: CrossSiteRule;
  /** The site's routes, compiled once (the top-level `routes` for the sign-in host). */
  routes: RouteTable;
  /** Whether this is publicUrl's host, where /login, /callback and the hand-off's start live. */
  signIn: boolean;
}

/** Longest Host value looked at: a longer one names no site (a host name is at most 253 characters, plus a port). */
const MAX_HOST_LENGTH = 300;
/** How many distinct Host spellings (case, port, trailing dot) are remembered per process: bounded, so no client can grow it. */
const SPELLINGS = 1024;

/**
 * Host -> site, built once from `server.publicUrl` and `sites`. Without
 * `sites` every request is the sign-in host's, whatever its Host header
 * says (the one-host gateway, unchanged); with it, a host that is neither
 * publicUrl's nor a site's has no site (404, nothing upstream).
 */
export class Sites {
  /** publicUrl's host. */
  readonly signIn: Site;
  /** Every site, the sign-in host first. */
  readonly all: readonly Site[];
  /** Whether `sites` is configured: only then does the Host header choose anything. */
  readonly several: boolean;
  /** Configured host (lower case, `host` or `host:port`) -> site. */
  readonly #byHost = new Map<string, Site>();
  /** Host header values seen and the site they named: the common case is one lookup, no string built. */
  readonly #spellings = new Map<string, Site>();
  readonly #trust: TrustFunction | false;

  constructor(config: Config, trust: TrustFunction | false, signInRoutes: RouteTable = compileRoutes(config)) {
    this.#trust = trust;
    const publicUrl = new URL(config.server.publicUrl);
    const proto = publicUrl.protocol.slice(0, -1);
    this.signIn = makeSite(config, publicUrl.host.toLowerCase(), publicUrl.origin, proto, signInRoutes, DEFAULT_PROVIDER, true);
    this.several = config.sites !== undefined;
    const sites = (config.sites ?? []).map((entry) => {
      const host = entry.host.toLowerCase().replace(/\.(?=:|$)/, '');
      return makeSite(config, host, `${proto}://${host}${portSuffix(publicUrl, host)}`, proto, compileRoutes(config, entry.routes), entry.provider ?? DEFAULT_PROVIDER, false);
    });
    this.all = [this.signIn, ...sites];
    // A site given with the sign-in host's name wins over it for that name: check refuses the pair (README "Several sites").
    this.#byHost.set(this.signIn.name, this.signIn);
    for (const site of sites) this.#byHost.set(site.name, site);
  }

  /**
   * The site of a request: by its Host header, or by X-Forwarded-Host when
   * the TCP peer is a trusted proxy (`server.trustProxy`); undefined when it
   * names no site. Without `sites`: always the sign-in host.
   */
  of(headers: IncomingHttpHeaders, peer: string | undefined): Site | undefined {
    if (!this.several) return this.signIn;
    const forwarded = headers['x-forwarded-host'];
    const host = forwarded !== undefined && this.#trust !== false && this.#trust(peer ?? '', 0) ? lastValue(forwarded) : headers.host;
    return this.byHost(host);
  }

  /** The site a host (a Host header value: name, optional port, any case, an optional trailing dot) names; undefined for none. */
  byHost(host: string | undefined): Site | undefined {
    if (host === undefined || host === '' || host.length > MAX_HOST_LENGTH) return undefined;
    const seen = this.#spellings.get(host);
    if (seen !== undefined) return seen;
    const site = this.#lookUp(host);
    if (site !== undefined && this.#spellings.size < SPELLINGS) this.#spellings.set(host, site);
    return site;
  }

  #lookUp(raw: string): Site | undefined {
    const host = raw.toLowerCase();
    // [::1]:8080, app.example.com.:8080, app.example.com
    const close = host.lastIndexOf(']');
    const colon = host.lastIndexOf(':');
    const hasPort = colon > close && colon > 0;
    let name = hasPort ? host.slice(0, colon) : host;
    const port = hasPort ? host.slice(colon + 1) : '';
    if (hasPort && !/^[0-9]{1,5}$/.test(port)) return undefined;
    if (name.endsWith('.')) name = name.slice(0, -1);
    if (name === '' || !/^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])$/.test(name)) return undefined;
    return (hasPort ? this.#byHost.get(`${name}:${port}`) : undefined) ?? this.#byHost.get(name);
  }

  /**
   * The site whose origin `url` is on (an absolute URL the browser is to
   * come back to): a configured site's host, the scheme publicUrl's;
   * undefined for any other.
   */
  ofUrl(url: URL): Site | undefined {
    if (!this.several || url.protocol !== `${this.signIn.proto}:` || url.username !== '' || url.password !== '') return undefined;
    const site = this.byHost(url.host);
    return site === undefined || site.signIn ? undefined : site;
  }
}

/** `:port` of publicUrl when a site without its own port is to be reached on it (a gateway on a non-default port serves every site there). */
function portSuffix(publicUrl: URL, host: string): string {
  const close = host.lastIndexOf(']');
  const colon = host.lastIndexOf(':');
  if (colon > close) return '';
  return publicUrl.port === '' ? '' : `:${publicUrl.port}`;
}

function lastValue(header: string | string[]): string {
  const value = Array.isArray(header) ? header[header.length - 1]! : header;
  const comma = value.lastIndexOf(',');
  return comma < 0 ? value.trim() : value.slice(comma + 1).trim();
}

function makeSite(config: Config, name: string, origin: string, proto: string, routes: RouteTable, provider: string, signIn: boolean): Site {
  const allowedOrigins = new Set([origin, ...config.csrf.allowedOrigins]);
  return {
    name,
    provider,
    origin,
    host: new URL(origin).host,
    proto,
    allowedOrigins,
    crossSite: createCrossSiteRule(config, allowedOrigins),
    routes,
    signIn,
  };
}
