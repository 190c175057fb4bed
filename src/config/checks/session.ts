import { cookieIsSecure, type Config } from '../schema.js';
import { isRedisUrl, parseRedisUrl } from '../store-url.js';
import { formatDuration } from '../duration.js';
import { parseUrl, type Rule } from './rule.js';

const KEY_BYTES = 32;
const STORE_SCHEMES = ['memory:', 'sqlite:'];
const STORE_FORMS =
  'must be memory://, sqlite://PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER[/DB] or redis+cluster://HOST:PORT[,HOST:PORT…] (rediss+ for TLS)';
const SECURE_REQUIRED = '(an https publicUrl or session.cookieSecure: true)';

/** `session` and `tokens`: keys, cookie attributes, the store and lifetimes. */
export const SESSION_RULES: readonly Rule[] = [
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
];

/**
 * Session settings that work but do not do what they seem to. A session
 * ends at `ttl` whatever the other two say (README "Sessions"), so a longer
 * idle limit never applies and a longer-lived cookie outlives its session,
 * showing the sign-in page to a browser that still "has" a cookie.
 */
export function sessionWarnings(config: Config): string[] {
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

function decodeKey(key: string): number | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(key)) return undefined;
  return Buffer.from(key, 'base64').length;
}
