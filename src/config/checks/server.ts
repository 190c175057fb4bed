import { isLoopbackHost } from '../loopback.js';
import { invalidAddressEntries } from '../addresses.js';
import { parseUrl, PATH_PATTERN, type Rule } from './rule.js';

/** `server`, `forwardAuth`, `paths` and `csrf`: who the gateway is, who may talk to it, and its own paths. */
export const SERVER_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ server: { trustProxy } }) {
      // Trusting every hop lets a client choose its own address (rate limit, logs) by sending X-Forwarded-For.
      if (trustProxy === true) {
        return [
          "server.trustProxy: true would trust every hop, so any client could choose its own address with X-Forwarded-For; give the number of proxies in front of gatehouse (a hop count such as 1) or the proxies' addresses/CIDRs (such as [10.0.0.0/8])",
        ];
      }
      if (!Array.isArray(trustProxy)) return [];
      return invalidAddressEntries(trustProxy).map((index) => `server.trustProxy[${index}]: ${trustProxy[index]} is not an IP address or a CIDR such as 10.0.0.0/8`);
    },
  },
  {
    reads: ['provider.dpop'],
    check({ forwardAuth: { trustedProxies, only }, provider }) {
      if (trustedProxies === undefined) return only ? ['forwardAuth.only: needs forwardAuth.trustedProxies (the proxies that may ask the endpoint)'] : [];
      const problems = invalidAddressEntries(trustedProxies).map(
        (index) => `forwardAuth.trustedProxies[${index}]: ${trustedProxies[index]} is not an IP address or a CIDR such as 10.0.0.0/8`,
      );
      // A DPoP proof names the URL of the request it goes with (RFC 9449 §4.2), which only the proxy knows.
      if (provider.dpop) problems.push('forwardAuth.trustedProxies: forward-auth cannot go with provider.dpop (the proxy, not gatehouse, sends the upstream request a proof would be for); turn one of them off');
      return problems;
    },
  },
  {
    reads: [],
    check({ server }) {
      const url = parseUrl(server.publicUrl);
      if (!url || !['http:', 'https:'].includes(url.protocol)) {
        return ['server.publicUrl: must be an absolute http(s) URL such as https://app.example.com'];
      }
      if (url.search || url.hash || url.username || url.password) return ['server.publicUrl: must not contain a query, fragment or credentials'];
      // With http on a real host the session cookie is not Secure (cookieSecure: auto) and travels in clear;
      // TLS is terminated in front of gatehouse, and publicUrl is what the browser sees (README "TLS").
      if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
        return [
          `server.publicUrl: must use https on ${url.hostname} (http is allowed only on localhost, *.localhost, 127.0.0.0/8 and [::1]); terminate TLS in front of gatehouse and give the https URL browsers use`,
        ];
      }
      return [];
    },
  },
  {
    reads: [],
    check({ paths }) {
      return Object.entries(paths)
        .filter(([, path]) => !PATH_PATTERN.test(path) || path === '/' || path.includes('//'))
        .map(([name]) => `paths.${name}: must be an absolute path such as /${name}, not / itself`);
    },
  },
  {
    reads: ['paths'],
    check({ paths }) {
      const seen = new Map<string, string>();
      const problems: string[] = [];
      for (const [name, path] of Object.entries(paths)) {
        const other = seen.get(path);
        if (other !== undefined) problems.push(`paths.${name}: same path as paths.${other}`);
        seen.set(path, name);
      }
      return problems;
    },
  },
  {
    reads: [],
    check({ csrf }) {
      return csrf.allowedOrigins.flatMap((origin, index) => {
        const url = parseUrl(origin);
        return url && url.origin === origin
          ? []
          : [`csrf.allowedOrigins[${index}]: must be an origin such as https://spa.example.com (scheme, host, optional port; no path)`];
      });
    },
  },
];
