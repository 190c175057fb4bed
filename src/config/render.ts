import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { stringify as stringifyYaml } from 'yaml';
import { ConfigSchema, PROVIDER_SECRET_KEYS, SECRET_KEYS, type Config } from './schema.js';
import { isMapping } from './load.js';
import { isRedisUrl, redactRedisPassword } from './store-url.js';

/** The effective configuration as YAML, in schema order, durations with units, every secret `[redacted]`. */
export function renderConfig(config: Config): string {
  const encoded = inSchemaOrder(ConfigSchema, Value.Encode(ConfigSchema, structuredClone(config))) as Record<string, Record<string, unknown>>;
  for (const key of SECRET_KEYS) {
    const [sectionName, name] = key.split('.') as [string, string];
    const section = encoded[sectionName]!;
    const value = section[name];
    if (value === undefined) continue;
    section[name] = Array.isArray(value) ? value.map(() => REDACTED) : REDACTED;
  }
  // Each named provider's secrets, as the top-level provider's (README "Several identity providers").
  for (const entry of Object.values((encoded.providers ?? {}) as Record<string, Record<string, unknown>>)) {
    for (const name of PROVIDER_SECRET_KEYS) if (entry[name] !== undefined) entry[name] = REDACTED;
  }
  encoded.session!.store = redactStorePassword(encoded.session!.store as string);
  return stringifyYaml(redactUrlCredentials(encoded));
}

const REDACTED = '[redacted]';

/**
 * `redis://user:secret@host:6379/0` -> `redis://user:[redacted]@host:6379/0`;
 * also the multi-host Redis forms, which the URL parser refuses.
 */
function redactStorePassword(value: string): string {
  if (isRedisUrl(value)) return redactRedisPassword(value, REDACTED);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return value;
  }
  if (url.password === '') return value;
  return `${url.protocol}//${url.username}:${REDACTED}@${url.host}${url.pathname}${url.search}${url.hash}`;
}

// Greedy to the authority's last @ (as `new URL` reads it): a password with a raw @ is hidden whole.
const URL_USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i;
const SECRET_PARAMETER = /([?&](?:password|pass|secret|token|key|auth|access_token|api[_-]?key)=)[^&#]*/gi;

/**
 * Every URL anywhere in the config (upstream, store, provider endpoints, and
 * whatever later keys hold one) with its credentials hidden: the password of
 * its user-info (`redis://user:secret@host` -> `redis://user:[redacted]@host`),
 * a user-info without one (it is often a token: `https://TOKEN@host`), and
 * secret-looking query parameters (`?password=`). Multi-host URLs such as
 * `redis+sentinel://u:p@h1:26379,h2:26379/m`, which `new URL` refuses, are
 * handled too (test/config/render.test.ts).
 */
function redactUrlCredentials(value: unknown): unknown {
  if (typeof value === 'string') {
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return value;
    return value
      .replace(URL_USERINFO, (_match, scheme: string, userinfo: string) => {
        if (userinfo === '') return `${scheme}@`;
        const colon = userinfo.indexOf(':');
        return colon < 0 ? `${scheme}${REDACTED}@` : `${scheme}${userinfo.slice(0, colon)}:${REDACTED}@`;
      })
      .replace(SECRET_PARAMETER, `$1${REDACTED}`);
  }
  if (Array.isArray(value)) return value.map(redactUrlCredentials);
  if (isMapping(value)) return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, redactUrlCredentials(entry)]));
  return value;
}

/** Orders object keys as the schema declares them (defaults were appended after the keys a file gave). */
function inSchemaOrder(schema: TSchema, value: unknown): unknown {
  const properties = (schema as { properties?: Record<string, TSchema> }).properties;
  if (properties === undefined || !isMapping(value)) return value;
  const ordered: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(properties)) {
    if (value[key] !== undefined) ordered[key] = inSchemaOrder(property, value[key]);
  }
  return ordered;
}
