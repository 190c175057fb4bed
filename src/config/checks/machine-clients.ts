import type { Config } from '../schema.js';
import { isLoopbackHost } from '../loopback.js';
import { parseUrl, type Rule } from './rule.js';

/**
 * The rules of `machineClients` and of routes' `accept` (README "Machine
 * clients"): where keys may be fetched from, and a bearer route that could
 * never admit anyone, or would admit everyone anyway.
 */
export const MACHINE_CLIENT_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ machineClients: { issuers } }) {
      const problems: string[] = [];
      const seen = new Map<string, number>();
      issuers.forEach((entry, index) => {
        const key = `machineClients.issuers[${index}]`;
        // A token's keys are only as trustworthy as the channel they come over: https, except on this host.
        const issuerProblem = urlProblem(entry.issuer);
        if (issuerProblem !== undefined) problems.push(`${key}.issuer: ${issuerProblem} (the iss of the tokens, exactly)`);
        if (entry.jwksUri !== undefined) {
          const jwksProblem = urlProblem(entry.jwksUri);
          if (jwksProblem !== undefined) problems.push(`${key}.jwksUri: ${jwksProblem}`);
        }
        const other = seen.get(entry.issuer);
        if (other !== undefined) problems.push(`${key}.issuer: same issuer as machineClients.issuers[${other}]; give one entry with all its audiences`);
        else seen.set(entry.issuer, index);
      });
      return problems;
    },
  },
  {
    reads: ['provider.issuer', 'provider.clientAuthMethod'],
    check({ machineClients: { introspection }, provider }) {
      if (!introspection) return [];
      // Only discovery names the introspection endpoint (RFC 8414 §2); explicit endpoints have no key for it.
      if (provider.issuer === undefined) return ['machineClients.introspection: needs provider.issuer (the introspection endpoint comes from its discovery document)'];
      // RFC 7662 §2.1: the introspection endpoint wants the caller authenticated.
      if (provider.clientAuthMethod === 'none') return ['machineClients.introspection: needs a provider.clientAuthMethod other than none (the gateway authenticates to the introspection endpoint as its client)'];
      return [];
    },
  },
  {
    reads: ['machineClients'],
    check({ routes = [], machineClients: { issuers, introspection } }) {
      return routes.flatMap((route, index) => {
        if (!route.accept.includes('bearer')) return [];
        const key = `routes[${index}].accept`;
        if (route.auth === 'public') return [`${key}: bearer on a public route admits nothing it does not admit already (a public route reads no credentials); use auth: required or optional`];
        if (issuers.length === 0 && !introspection) {
          return [`${key}: bearer needs machineClients.issuers or machineClients.introspection: true, else no token could ever be accepted`];
        }
        return [];
      });
    },
  },
];

/**
 * Settings that work but do nothing: machine clients configured while no
 * route accepts a bearer token.
 */
export function machineClientWarnings({ routes = [], machineClients: { issuers, introspection } }: Config): string[] {
  if ((issuers.length === 0 && !introspection) || routes.some((route) => route.accept.includes('bearer'))) return [];
  return ['machineClients: no route has accept: [bearer], so no machine client token is ever checked; add bearer to the accept of the routes they call'];
}

function urlProblem(value: string): string | undefined {
  const url = parseUrl(value);
  if (url === undefined) return 'must be an absolute https URL';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    return 'must be an absolute https URL (http is allowed only on localhost, 127.0.0.0/8 and [::1])';
  }
  if (url.search || url.hash || url.username || url.password) return 'must not contain a query, fragment or credentials';
  return undefined;
}
