import { readFileSync } from 'node:fs';
import type { TSchema } from '@sinclair/typebox';
import { Value, type ValueError } from '@sinclair/typebox/value';
import { parse as parseYaml } from 'yaml';
import { ConfigSchema, type Config } from './schema.js';
import { checkConfig, problemKey } from './checks.js';
import { ConfigError } from '../errors.js';

const ENV_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
/**
 * `${NAME}` is not valid YAML inside a flow sequence (`[${KEY}]`, as the
 * documented example writes it), so references are swapped for this
 * marker before parsing and back afterwards.
 */
const MARKER = '$\u2063ENV(';
const MARKED_REFERENCE = /\$\u2063ENV\(([A-Za-z_][A-Za-z0-9_]*)\)/g;

/**
 * Reads a YAML file and returns the frozen, validated configuration.
 * @throws ConfigError listing every problem at once.
 * @example const config = loadConfigFile('config/gatehouse.yaml', process.env);
 */
export function loadConfigFile(file: string, env: NodeJS.ProcessEnv): Config {
  return loadConfig(readConfigDocument(file), env);
}

/**
 * Reads a YAML file into the document {@link loadConfig} validates, `${ENV}`
 * references left as written (`gatehouse demo --config` replaces the
 * provider section before loading).
 * @throws ConfigError when the file cannot be read or is not YAML.
 */
export function readConfigDocument(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`config file ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  let document: unknown;
  try {
    document = unmark(parseYaml(text.replace(ENV_REFERENCE, `${MARKER}$1)`)) ?? {});
  } catch (err) {
    throw new ConfigError([`config file ${file}: not valid YAML (${(err as Error).message.split('\n')[0]})`]);
  }
  return document;
}

/**
 * Validates a parsed configuration document: defaults, `${ENV}` references,
 * schema, then the checks between keys. Returns a deeply frozen Config.
 * @throws ConfigError listing every problem at once: those of the schema
 *   and of the environment together with the checks between keys.
 * @example const config = loadConfig({ provider: { issuer: 'https://idp.example.com' } }, process.env);
 */
export function loadConfig(document: unknown, env: NodeJS.ProcessEnv): Config {
  if (!isMapping(document)) {
    throw new ConfigError(['config: must be a YAML mapping of sections (server, provider, session, ...)']);
  }
  const problems: string[] = [];
  const written = withoutEmptySections(document);
  const withDefaults = keepFaithful(written, Value.Default(ConfigSchema, structuredClone(written)));
  const interpolated = scopesAsList(interpolate(withDefaults, env, '', problems));
  const converted = keepFaithful(interpolated, Value.Convert(ConfigSchema, structuredClone(interpolated)));
  const errors = [...Value.Errors(ConfigSchema, converted)];
  for (const error of errors) {
    const problem = describe(error);
    const key = problemKey(problem);
    if (!problems.some((known) => problemKey(known) === key)) problems.push(problem);
  }
  // The checks between keys run even when some keys are wrong, on a copy
  // where those keys hold their defaults, so one run reports everything.
  const candidate = errors.length === 0 ? converted : repaired(converted, errors);
  const config = candidate === undefined ? undefined : Value.Decode(ConfigSchema, candidate);
  if (config !== undefined) problems.push(...checkConfig(config, problems.map(problemKey)));
  if (problems.length > 0 || config === undefined) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** Whether `value` is a plain mapping (a YAML object), not a list or a scalar. */
export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A section whose keys are all commented out parses as null: it means "all defaults". */
function withoutEmptySections(document: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(document).filter(([, value]) => value !== null));
}

/**
 * Value.Default and Value.Convert are generous: Convert turns the strings an
 * `${ENV}` reference yields into numbers and booleans (`port: ${PORT}`) and
 * a single value into a one-item list, but it also truncates (`1.5` -> 1,
 * `"8080.9"` -> 8080) and maps `true` -> 1; Default merges a mapping written
 * where a list belongs into the default list. Such a result is undone here,
 * keeping what was written, so that the schema reports it.
 */
function keepFaithful(written: unknown, result: unknown): unknown {
  if (written === undefined || written === result) return result;
  if (Array.isArray(result)) {
    if (!Array.isArray(written)) return written === null || typeof written === 'object' ? written : result;
    return result.map((item, index) => keepFaithful(written[index], item));
  }
  if (isMapping(result)) {
    if (!isMapping(written)) return typeof written === 'object' ? written : result;
    return Object.fromEntries(Object.entries(result).map(([key, item]) => [key, keepFaithful(written[key], item)]));
  }
  if (typeof written === 'object') return result;
  return String(written) === String(result) ? result : written;
}

/**
 * A copy of `document` without the values the schema refused, defaults
 * filled in again; a refused list item is replaced by a stand-in of its type
 * where one exists (so the other items keep their positions), else the whole
 * list goes. Undefined when that still does not satisfy the schema.
 */
function repaired(document: unknown, errors: ValueError[]): unknown {
  const copy = structuredClone(document);
  for (const error of errors) {
    const parts = error.path.split('/').slice(1).map(unescapePointer);
    const last = parts.at(-1);
    const parent = parts.slice(0, -1).reduce(child, copy);
    if (Array.isArray(parent) && last !== undefined && /^\d+$/.test(last)) {
      const standIn = standInFor(error.schema);
      if (standIn !== undefined) {
        parent[Number(last)] = standIn;
        continue;
      }
      parts.pop();
    }
    const firstIndex = parts.findIndex((part) => /^\d+$/.test(part));
    const path = firstIndex < 0 ? parts : parts.slice(0, firstIndex);
    const owner = path.slice(0, -1).reduce(child, copy);
    if (!isMapping(owner) || path.length === 0) continue;
    // A required key without a default (provider.clientId) gets a stand-in, so the other keys are still checked.
    const standIn = firstIndex < 0 && !('default' in error.schema) ? standInFor(error.schema) : undefined;
    if (standIn === undefined) delete owner[path.at(-1)!];
    else owner[path.at(-1)!] = standIn;
  }
  const candidate = Value.Default(ConfigSchema, copy);
  return Value.Check(ConfigSchema, candidate) ? candidate : undefined;
}

function child(node: unknown, key: string): unknown {
  return typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[key] : undefined;
}

function standInFor(schema: TSchema): unknown {
  try {
    const value = Value.Create(schema);
    return Value.Check(schema, value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function unescapePointer(part: string): string {
  return part.replace(/~1/g, '/').replace(/~0/g, '~');
}

function unmark(value: unknown): unknown {
  if (typeof value === 'string') return unmarkText(value);
  if (Array.isArray(value)) return value.map(unmark);
  if (isMapping(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [unmarkText(key), unmark(item)]));
  return value;
}

function unmarkText(text: string): string {
  return text.replace(MARKED_REFERENCE, '$${$1}');
}

function interpolate(value: unknown, env: NodeJS.ProcessEnv, path: string, problems: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REFERENCE, (_match, name: string) => {
      const replacement = env[name];
      if (replacement === undefined) {
        problems.push(`${path}: environment variable ${name} is not set`);
        return '';
      }
      return replacement;
    });
  }
  if (Array.isArray(value)) return value.map((item, index) => interpolate(item, env, `${path}[${index}]`, problems));
  if (isMapping(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, interpolate(item, env, path ? `${path}.${key}` : key, problems)]),
    );
  }
  return value;
}

/**
 * `scopes: "openid profile email"` is how an authorization server's docs
 * write scopes (RFC 6749 §3.3: a space-delimited list): read it as that list
 * rather than as one scope with spaces in it.
 */
function scopesAsList(document: unknown): unknown {
  if (!isMapping(document)) return document;
  const providers = document.providers;
  return {
    ...document,
    ...(document.provider === undefined ? {} : { provider: providerScopesAsList(document.provider) }),
    ...(isMapping(providers) ? { providers: Object.fromEntries(Object.entries(providers).map(([name, entry]) => [name, providerScopesAsList(entry)])) } : {}),
  };
}

function providerScopesAsList(provider: unknown): unknown {
  if (!isMapping(provider) || typeof provider.scopes !== 'string') return provider;
  return { ...provider, scopes: provider.scopes.split(/[ \t]+/).filter((scope) => scope !== '') };
}

function describe(error: ValueError): string {
  const path = toKeyPath(error.path);
  if (error.message === 'Expected required property') return `${path}: required`;
  if (error.message.startsWith('Unexpected property')) return `${path}: unknown key${suggestion(error.path)}`;
  const message = (error.schema as { errorMessage?: string }).errorMessage ?? error.message.toLowerCase();
  // A duration the reader could not read is shown back, so a unit typo (`10 m`, `1w`) is seen at once; durations are never secret.
  if (message.startsWith('must be a duration')) return `${path}: ${message}; got ${JSON.stringify(error.value)}`;
  return `${path || 'config'}: ${message}`;
}

/**
 * For an unknown key: the nearest key of the same section (`sesion` ->
 * `session`), or the section where a key of that name belongs (`server.ttl`
 * -> `session.ttl`).
 */
function suggestion(pointer: string): string {
  const parts = pointer.split('/').slice(1).map(unescapePointer);
  const name = parts.at(-1) ?? '';
  const section = parts.slice(0, -1).reduce<TSchema | undefined>((schema, part) => schemaProperties(schema)?.[part], ConfigSchema);
  const siblings = Object.keys(schemaProperties(section) ?? {});
  const nearest = siblings
    .map((key) => ({ key, distance: editDistance(name.toLowerCase(), key.toLowerCase()) }))
    .filter(({ key, distance }) => distance <= Math.max(1, Math.floor(key.length / 3)))
    .sort((a, b) => a.distance - b.distance)[0];
  if (nearest !== undefined) return `; did you mean ${[...parts.slice(0, -1), nearest.key].join('.')}?`;
  if (parts.length === 2) {
    const home = Object.entries(schemaProperties(ConfigSchema)!).find(([, schema]) => schemaProperties(schema)?.[name] !== undefined)?.[0];
    if (home !== undefined) return `; it belongs in ${home} (${home}.${name})`;
  }
  return ' (check its spelling and section)';
}

function schemaProperties(schema: TSchema | undefined): Record<string, TSchema> | undefined {
  return (schema as { properties?: Record<string, TSchema> } | undefined)?.properties;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** `/session/encryptionKeys/1` -> `session.encryptionKeys[1]` */
function toKeyPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map(unescapePointer)
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}
