import { isLoopbackHost } from '../loopback.js';
import type { Config } from '../schema.js';
import { MACHINE_CLIENT_RULES } from './machine-clients.js';
import { ROUTE_RULES } from './routes.js';
import { parseUrl, type Rule } from './rule.js';
import { TOKEN_TARGET_RULES } from './token-targets.js';

/** The rules a site's `routes` obey, as the top-level `routes` do (README "Routes"). */
const RULES_OF_ROUTES: readonly Rule[] = [...ROUTE_RULES, ...TOKEN_TARGET_RULES, ...MACHINE_CLIENT_RULES];

/** `app.example.com` of `App.Example.com.:8443`. */
function hostName(host: string): string {
  const lower = host.toLowerCase();
  const close = lower.lastIndexOf(']');
  const colon = lower.lastIndexOf(':');
  const name = colon > close ? lower.slice(0, colon) : lower;
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** `host[:port]`, lower case, without a trailing dot: what two sites may not share. */
function hostKey(host: string): string {
  const name = hostName(host);
  const lower = host.toLowerCase();
  const close = lower.lastIndexOf(']');
  const colon = lower.lastIndexOf(':');
  return colon > close ? `${name}${lower.slice(colon)}` : name;
}

/** `sites` (README "Several sites"): one site per host, none on the sign-in host, https unless on loopback, and each site's routes as sound as the top-level ones. */
export const SITE_RULES: readonly Rule[] = [
  {
    reads: ['server.publicUrl'],
    check({ sites = [], server }) {
      const publicUrl = parseUrl(server.publicUrl);
      const problems: string[] = [];
      const seen = new Map<string, number>();
      sites.forEach((site, index) => {
        const key = hostKey(site.host);
        const other = seen.get(key);
        if (other !== undefined) problems.push(`sites[${index}].host: ${site.host} is also sites[${other}].host; one host serves one site`);
        seen.set(key, index);
        if (publicUrl === undefined) return;
        // The sign-in host serves /login and /callback and the top-level routes: a site there would shadow them, or they it.
        if (hostName(site.host) === hostName(publicUrl.host)) {
          problems.push(`sites[${index}].host: ${site.host} is publicUrl's host, the sign-in host, whose routes are the top-level routes; give the site another host name, or move its routes to the top-level routes`);
        }
        // The scheme is publicUrl's: http only where the traffic never leaves the machine (RFC 6761 names, loopback addresses).
        if (publicUrl.protocol === 'http:' && !isLoopbackHost(hostName(site.host))) {
          problems.push(`sites[${index}].host: ${site.host} would be served over http (publicUrl's scheme), which is allowed only on localhost, *.localhost, 127.0.0.0/8 and [::1]; use an https publicUrl`);
        }
      });
      return problems;
    },
  },
  {
    reads: ['providers'],
    check({ sites = [], providers = {} }) {
      return sites.flatMap((site, index) =>
        site.provider === undefined || site.provider === 'default' || Object.hasOwn(providers, site.provider)
          ? []
          : [`sites[${index}].provider: ${site.provider} is not a provider; name an entry of providers, or leave it out for provider`],
      );
    },
  },
  {
    reads: [],
    check(config: Config) {
      return (config.sites ?? []).flatMap((site, index) =>
        RULES_OF_ROUTES.flatMap((rule) => rule.check({ ...config, routes: site.routes }))
          .filter((problem) => problem.startsWith('routes['))
          .map((problem) => `sites[${index}].${problem}`),
      );
    },
  },
];
