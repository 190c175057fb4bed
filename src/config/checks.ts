import type { Config } from './schema.js';
import { isLoopbackHost } from './loopback.js';

const KEY_BYTES = 32;
const STORE_SCHEMES = ['memory:', 'sqlite:', 'redis:', 'rediss:'];

/**
 * The checks that span several keys or need more than a type: URLs, keys,
 * cookie rules. Returns one `key: what is wrong` line per problem.
 */
export function checkConfig(config: Config): string[] {
  const problems: string[] = [];
  const { server, provider, session, paths } = config;

  const publicUrl = parseUrl(server.publicUrl);
  if (!publicUrl || !['http:', 'https:'].includes(publicUrl.protocol)) {
    problems.push('server.publicUrl: must be an absolute http(s) URL such as https://app.example.com');
  } else if (publicUrl.search || publicUrl.hash || publicUrl.username || publicUrl.password) {
    problems.push('server.publicUrl: must not contain a query, fragment or credentials');
  }

  const upstream = parseUrl(config.upstream);
  if (!upstream || !['http:', 'https:'].includes(upstream.protocol)) {
    problems.push('upstream: must be an absolute http(s) URL such as http://127.0.0.1:3000');
  }

  problems.push(...checkProvider(provider));

  session.encryptionKeys.forEach((key, index) => {
    const bytes = decodeKey(key);
    if (bytes !== KEY_BYTES) {
      problems.push(
        `session.encryptionKeys[${index}]: must be base64 of exactly ${KEY_BYTES} bytes, got ${bytes ?? 'invalid base64'} (generate one with: openssl rand -base64 32)`,
      );
    }
  });

  const secure = cookieIsSecure(config);
  if (session.cookieSameSite === 'none' && !secure) {
    problems.push('session.cookieSameSite: none requires a Secure cookie (an https publicUrl or session.cookieSecure: true)');
  }
  if (session.cookieName.startsWith('__Host-') && !secure) {
    problems.push('session.cookieName: a __Host- cookie must be Secure (an https publicUrl or session.cookieSecure: true)');
  }
  if (session.cookieName.startsWith('__Secure-') && !secure) {
    problems.push('session.cookieName: a __Secure- cookie must be Secure (an https publicUrl or session.cookieSecure: true)');
  }

  if (!STORE_SCHEMES.includes(parseUrl(session.store)?.protocol ?? '')) {
    problems.push('session.store: must be memory://, sqlite://PATH, redis://HOST:PORT/DB or rediss://HOST:PORT/DB');
  }
  if (session.ttl === 0) problems.push('session.ttl: must be greater than 0');
  if (config.tokens.defaultLifetime === 0) problems.push('tokens.defaultLifetime: must be greater than 0');

  const seen = new Map<string, string>();
  for (const [name, path] of Object.entries(paths)) {
    if (!/^\/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/.test(path) || path === '/' || path.includes('//')) {
      problems.push(`paths.${name}: must be an absolute path such as /${name}, not / itself`);
    } else if (seen.has(path)) {
      problems.push(`paths.${name}: same path as paths.${seen.get(path)}`);
    }
    seen.set(path, name);
  }

  config.csrf.allowedOrigins.forEach((origin, index) => {
    const url = parseUrl(origin);
    if (!url || url.origin !== origin) {
      problems.push(`csrf.allowedOrigins[${index}]: must be an origin such as https://spa.example.com (scheme, host, optional port; no path)`);
    }
  });
  return problems;
}

function checkProvider(provider: Config['provider']): string[] {
  const problems: string[] = [];
  const urlKeys = [
    'issuer',
    'authorizationEndpoint',
    'tokenEndpoint',
    'userinfoEndpoint',
    'revocationEndpoint',
    'endSessionEndpoint',
    'postLogoutRedirectUri',
  ] as const;
  for (const key of urlKeys) {
    const value = provider[key];
    if (value === undefined) continue;
    const url = parseUrl(value);
    if (!url) problems.push(`provider.${key}: must be an absolute URL`);
    else if (key !== 'postLogoutRedirectUri' && url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
      problems.push(`provider.${key}: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])`);
    }
  }
  if (provider.issuer === undefined) {
    if (provider.authorizationEndpoint === undefined || provider.tokenEndpoint === undefined) {
      problems.push('provider.issuer: required (or give provider.authorizationEndpoint and provider.tokenEndpoint for a server without discovery)');
    }
    if (provider.userinfoEndpoint === undefined) {
      problems.push('provider.userinfoEndpoint: required without provider.issuer (the user is identified through userinfo)');
    }
  }
  const method = provider.clientAuthMethod;
  if ((method === 'client_secret_post' || method === 'client_secret_basic') && provider.clientSecret === undefined) {
    problems.push(`provider.clientSecret: required with clientAuthMethod ${method}`);
  }
  if (method === 'private_key_jwt' && provider.privateKey === undefined) {
    problems.push('provider.privateKey: required with clientAuthMethod private_key_jwt (a PKCS#8 PEM private key)');
  }
  return problems;
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

function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}
