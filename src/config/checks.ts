import type { Config } from './schema.js';
import { isLoopbackHost } from './loopback.js';
import { isRedisUrl, parseRedisUrl } from '../session/backends/redis-url.js';
import { formatDuration } from './duration.js';
import { statSync } from 'node:fs';
import { extname } from 'node:path';
import { LOGO_MAX_BYTES, LOGO_TYPES } from '../http/page-template.js';
import { inspectClientKey } from '../oauth/client-key.js';
import { isAmbiguousPath, isUnder, normalRoutePath } from '../routing/route-table.js';
import { invalidAddressEntries } from '../http/address-list.js';

const KEY_BYTES = 32;
const STORE_SCHEMES = ['memory:', 'sqlite:'];
const PROVIDER_URL_KEYS = [
  'issuer',
  'authorizationEndpoint',
  'tokenEndpoint',
  'userinfoEndpoint',
  'revocationEndpoint',
  'endSessionEndpoint',
  'postLogoutRedirectUri',
] as const;
const PATH_PATTERN = /^\/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/;
/** Headers the gateway sets itself on every upstream request (or that frame the message): never an identity header. */
const RESERVED_HEADERS = new Set([
  'authorization',
  'cookie',
  'host',
  'dpop',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'forwarded',
  'connection',
  'content-length',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'keep-alive',
  'proxy-authorization',
]);

/**
 * A check that spans several keys or needs more than a type. `reads` names
 * the keys it depends on besides the ones it reports on: when one of them
 * is already known to be wrong, the rule is skipped rather than report a
 * consequence of a value the operator did not write.
 */
interface Rule {
  reads: readonly string[];
  check(config: Config): string[];
}

const STORE_FORMS =
  'must be memory://, sqlite://PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER[/DB] or redis+cluster://HOST:PORT[,HOST:PORT…] (rediss+ for TLS)';

const SECURE_REQUIRED = '(an https publicUrl or session.cookieSecure: true)';

const RULES: readonly Rule[] = [
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
          `server.publicUrl: must use https on ${url.hostname} (http is allowed only on localhost, 127.0.0.0/8 and [::1]); terminate TLS in front of gatehouse and give the https URL browsers use`,
        ];
      }
      return [];
    },
  },
  {
    reads: [],
    check({ upstream, routes }) {
      if (routes !== undefined) return [];
      const url = parseUrl(upstream);
      return url && ['http:', 'https:'].includes(url.protocol) ? [] : ['upstream: must be an absolute http(s) URL such as http://127.0.0.1:3000'];
    },
  },
  {
    reads: [],
    check({ provider }) {
      const problems: string[] = [];
      for (const key of PROVIDER_URL_KEYS) {
        const value = provider[key];
        if (value === undefined) continue;
        const url = parseUrl(value);
        if (!url || !['http:', 'https:'].includes(url.protocol)) problems.push(`provider.${key}: must be an absolute http(s) URL`);
        // postLogoutRedirectUri is where the browser lands, not the authorization server.
        else if (key !== 'postLogoutRedirectUri' && url.protocol !== 'https:' && !isLoopbackHost(url.hostname)) {
          problems.push(`provider.${key}: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])`);
        }
      }
      return problems;
    },
  },
  {
    reads: ['provider.authorizationEndpoint', 'provider.tokenEndpoint'],
    check({ provider }) {
      if (provider.issuer !== undefined || (provider.authorizationEndpoint !== undefined && provider.tokenEndpoint !== undefined)) return [];
      return ['provider.issuer: required (or give provider.authorizationEndpoint and provider.tokenEndpoint for a server without discovery)'];
    },
  },
  {
    reads: ['provider.issuer'],
    check({ provider }) {
      if (provider.issuer !== undefined || provider.userinfoEndpoint !== undefined) return [];
      return ['provider.userinfoEndpoint: required without provider.issuer (the user is identified through userinfo)'];
    },
  },
  {
    reads: ['provider.clientAuthMethod'],
    check({ provider: { clientAuthMethod: method, clientSecret, privateKey } }) {
      if ((method === 'client_secret_post' || method === 'client_secret_basic') && clientSecret === undefined) {
        return [`provider.clientSecret: required with clientAuthMethod ${method}`];
      }
      if (method === 'private_key_jwt' && privateKey === undefined) {
        return ['provider.privateKey: required with clientAuthMethod private_key_jwt (a PKCS#8 PEM private key)'];
      }
      if (method === 'private_key_jwt') {
        const inspected = inspectClientKey(privateKey!);
        // The key itself is never quoted: only what kind of key it is.
        if ('problem' in inspected) return [`provider.privateKey: ${inspected.problem}`];
      }
      return [];
    },
  },
  {
    reads: ['provider.issuer'],
    check({ provider }) {
      // Only discovery names the PAR endpoint (RFC 9126 §5); explicit endpoints have no key for it.
      if (provider.pushedAuthorization !== 'required' || provider.issuer !== undefined) return [];
      return ['provider.pushedAuthorization: required needs provider.issuer (the endpoint comes from discovery)'];
    },
  },
  {
    reads: [],
    check({ session }) {
      return session.encryptionKeys.flatMap((key, index) => {
        const bytes = decodeKey(key);
        return bytes === KEY_BYTES
          ? []
          : [
              `session.encryptionKeys[${index}]: must be base64 of exactly ${KEY_BYTES} bytes, got ${bytes ?? 'invalid base64'} (generate one with: openssl rand -base64 32)`,
            ];
      });
    },
  },
  {
    reads: ['session.cookieSecure', 'server.publicUrl'],
    check(config) {
      const { cookieSameSite, cookieName } = config.session;
      if (cookieIsSecure(config)) return [];
      const problems: string[] = [];
      // Browsers ignore a SameSite=None cookie without Secure (RFC 6265bis storage model).
      if (cookieSameSite === 'none') problems.push(`session.cookieSameSite: none requires a Secure cookie ${SECURE_REQUIRED}`);
      // RFC 6265bis §4.1.3: browsers refuse prefixed cookies without Secure.
      for (const prefix of ['__Host-', '__Secure-']) {
        if (cookieName.startsWith(prefix)) problems.push(`session.cookieName: a ${prefix} cookie must be Secure ${SECURE_REQUIRED}`);
      }
      return problems;
    },
  },
  {
    reads: [],
    check({ session, tokens }) {
      const problems: string[] = [];
      if (isRedisUrl(session.store)) {
        try {
          parseRedisUrl(session.store);
        } catch (err) {
          problems.push(`session.store: ${(err as Error).message}`);
        }
      } else if (!STORE_SCHEMES.includes(parseUrl(session.store)?.protocol ?? '')) {
        problems.push(`session.store: ${STORE_FORMS}`);
      }
      if (session.ttl === 0) problems.push('session.ttl: must be greater than 0');
      if (tokens.defaultLifetime === 0) problems.push('tokens.defaultLifetime: must be greater than 0');
      return problems;
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
    check({ pages }) {
      const problems: string[] = [];
      if (pages.dir !== undefined) {
        const stat = statOf(pages.dir);
        if (stat === undefined) problems.push(`pages.dir: ${pages.dir} does not exist or cannot be read`);
        else if (!stat.isDirectory()) problems.push(`pages.dir: ${pages.dir} is not a directory`);
      }
      if (pages.logo !== undefined) {
        const stat = statOf(pages.logo);
        if (LOGO_TYPES[extname(pages.logo).toLowerCase()] === undefined) {
          problems.push(`pages.logo: must be an image file ending in ${Object.keys(LOGO_TYPES).join(', ')}`);
        } else if (stat === undefined || !stat.isFile()) problems.push(`pages.logo: ${pages.logo} does not exist or is not a file`);
        else if (stat.size > LOGO_MAX_BYTES) problems.push(`pages.logo: ${stat.size} bytes, at most ${LOGO_MAX_BYTES} (it is inlined into every page)`);
      }
      return problems;
    },
  },
  {
    reads: [],
    check({ routes = [] }) {
      return routes.flatMap((route, index) => {
        const problems: string[] = [];
        const key = `routes[${index}]`;
        if (!PATH_PATTERN.test(route.path) || route.path.includes('//') || isAmbiguousPath(route.path)) {
          problems.push(`${key}.path: must be an absolute path such as /api/orders (no //, . or .. segments, query or fragment)`);
        }
        const upstream = parseUrl(route.upstream);
        if (!upstream || !['http:', 'https:'].includes(upstream.protocol)) {
          problems.push(`${key}.upstream: must be an absolute http(s) URL such as http://orders:8080 or http://orders:8080/v1`);
        } else if (upstream.search || upstream.hash || upstream.username || upstream.password) {
          problems.push(`${key}.upstream: must not contain a query, fragment or credentials`);
        }
        if (route.auth === 'public' && route.token === 'access') {
          problems.push(`${key}.token: access is not allowed on a public route (it reads no session); use auth: optional to send a token when signed in`);
        }
        if (route.allow !== undefined && route.auth !== 'required') {
          problems.push(`${key}.allow: only on a route with auth: required (it has auth: ${route.auth})`);
        }
        for (const name of Object.keys(route.headers)) {
          if (RESERVED_HEADERS.has(name.toLowerCase())) problems.push(`${key}.headers.${name}: the gateway sets this header itself; name another (e.g. X-Forwarded-User)`);
        }
        return problems;
      });
    },
  },
  {
    reads: ['paths'],
    check({ routes = [], paths }) {
      const problems: string[] = [];
      const seen = new Map<string, number>();
      routes.forEach((route, index) => {
        const path = normalRoutePath(route.path);
        const other = seen.get(path);
        if (other !== undefined) problems.push(`routes[${index}].path: same path as routes[${other}] (${routes[other]!.path})`);
        else seen.set(path, index);
        const gatewayPath = Object.entries(paths).find(([, own]) => isUnder(path, own));
        if (gatewayPath !== undefined) {
          problems.push(`routes[${index}].path: ${route.path} is the gateway's own paths.${gatewayPath[0]} (${gatewayPath[1]}) or lies under it; gateway paths come before every route`);
        }
      });
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

/**
 * Settings that work but do not do what they seem to: `gatehouse check`
 * prints each as `warning: key: ...` on stderr, and the gateway logs them at
 * start-up. A session ends at `ttl` whatever the other two say (README
 * "Sessions"), so a longer idle limit never applies and a longer-lived
 * cookie outlives its session, showing the sign-in page to a browser that
 * still "has" a cookie.
 * @example configWarnings(config) // ['session.idleTimeout: 48h is longer than session.ttl (24h): ...']
 */
export function configWarnings(config: Config): string[] {
  const { ttl, idleTimeout, cookieMaxAge } = config.session;
  const warnings: string[] = [];
  if (idleTimeout > ttl) {
    warnings.push(
      `session.idleTimeout: ${formatDuration(idleTimeout)} is longer than session.ttl (${formatDuration(ttl)}): a session always ends at ttl, so the idle limit never applies`,
    );
  }
  if (cookieMaxAge > ttl) {
    warnings.push(
      `session.cookieMaxAge: ${formatDuration(cookieMaxAge)} is longer than session.ttl (${formatDuration(ttl)}): the cookie outlives its session; set it to ttl or less`,
    );
  }
  return warnings;
}

/**
 * The checks that span several keys or need more than a type: URLs, keys,
 * cookie rules. Returns one `key: what is wrong` line per problem.
 *
 * @param invalidKeys keys already reported (schema or environment problems,
 *   e.g. `server.port`, `session.encryptionKeys[1]`); `config` then holds a
 *   stand-in default there, so no problem about them, or derived from them,
 *   is reported again.
 * @example checkConfig(config) // ['session.cookieSameSite: none requires a Secure cookie ...']
 */
export function checkConfig(config: Config, invalidKeys: readonly string[] = []): string[] {
  const isInvalid = (key: string) => invalidKeys.some((invalid) => related(key, invalid));
  return RULES.filter((rule) => !rule.reads.some(isInvalid))
    .flatMap((rule) => rule.check(config))
    .filter((problem) => !isInvalid(problemKey(problem)));
}

/** `session.encryptionKeys[0]` of `session.encryptionKeys[0]: must be ...`. */
export function problemKey(problem: string): string {
  const end = problem.indexOf(': ');
  return end < 0 ? problem : problem.slice(0, end);
}

/** Whether two key paths are the same or one contains the other (`session` and `session.store`). */
function related(a: string, b: string): boolean {
  return a === b || contains(a, b) || contains(b, a);
}

function contains(outer: string, inner: string): boolean {
  return inner.startsWith(outer) && (inner[outer.length] === '.' || inner[outer.length] === '[');
}

/** Whether cookies carry the Secure attribute, resolving `auto` from publicUrl. */
export function cookieIsSecure(config: Config): boolean {
  const setting = config.session.cookieSecure;
  return setting === 'auto' ? config.server.publicUrl.startsWith('https:') : setting;
}

function decodeKey(key: string): number | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(key)) return undefined;
  return Buffer.from(key, 'base64').length;
}

function statOf(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}
