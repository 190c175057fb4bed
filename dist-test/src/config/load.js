import { readFileSync } from 'node:fs';
import { Value } from '@sinclair/typebox/value';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ConfigSchema, SECRET_KEYS } from './schema.js';
import { checkConfig } from './checks.js';
/** Thrown with every problem found, one `key: what is wrong` line each (GH_ERR_CONFIG_INVALID). */
export class ConfigError extends Error {
    problems;
    code = 'GH_ERR_CONFIG_INVALID';
    constructor(problems) {
        super(problems.join('\n'));
        this.problems = problems;
    }
}
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
export function loadConfigFile(file, env) {
    let text;
    try {
        text = readFileSync(file, 'utf8');
    }
    catch (err) {
        throw new ConfigError([`config file ${file}: cannot be read (${err.code ?? 'error'})`]);
    }
    let document;
    try {
        document = unmark(parseYaml(text.replace(ENV_REFERENCE, `${MARKER}$1)`)) ?? {});
    }
    catch (err) {
        throw new ConfigError([`config file ${file}: not valid YAML (${err.message.split('\n')[0]})`]);
    }
    return loadConfig(document, env);
}
/**
 * Validates a parsed configuration document: defaults, `${ENV}` references,
 * schema, then the checks between keys. Returns a deeply frozen Config.
 * @throws ConfigError listing every problem at once.
 */
export function loadConfig(document, env) {
    if (typeof document !== 'object' || document === null || Array.isArray(document)) {
        throw new ConfigError(['config: must be a YAML mapping of sections (server, provider, session, ...)']);
    }
    const problems = [];
    const withDefaults = Value.Default(ConfigSchema, structuredClone(document));
    const interpolated = Value.Convert(ConfigSchema, interpolate(withDefaults, env, '', problems));
    for (const error of Value.Errors(ConfigSchema, interpolated)) {
        const problem = describe(error);
        const key = problem.slice(0, problem.indexOf(': ') + 2);
        if (!problems.some((known) => known.startsWith(key)))
            problems.push(problem);
    }
    if (problems.length > 0)
        throw new ConfigError(problems);
    const config = Value.Decode(ConfigSchema, interpolated);
    problems.push(...checkConfig(config));
    if (problems.length > 0)
        throw new ConfigError(problems);
    return deepFreeze(config);
}
/** The effective configuration as YAML, durations with units, every secret `[redacted]`. */
export function renderConfig(config) {
    const encoded = Value.Encode(ConfigSchema, structuredClone(config));
    for (const key of SECRET_KEYS) {
        const [sectionName, name] = key.split('.');
        const section = encoded[sectionName];
        const value = section[name];
        if (value === undefined)
            continue;
        section[name] = Array.isArray(value) ? value.map(() => '[redacted]') : '[redacted]';
    }
    encoded.session.store = redactUrlPassword(encoded.session.store);
    return stringifyYaml(encoded);
}
function redactUrlPassword(url) {
    return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@]*@/, '$1[redacted]@');
}
function unmark(value) {
    if (typeof value === 'string')
        return value.replace(MARKED_REFERENCE, '$${$1}');
    if (Array.isArray(value))
        return value.map(unmark);
    if (typeof value === 'object' && value !== null)
        return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, unmark(item)]));
    return value;
}
function interpolate(value, env, path, problems) {
    if (typeof value === 'string') {
        return value.replace(ENV_REFERENCE, (_match, name) => {
            const replacement = env[name];
            if (replacement === undefined) {
                problems.push(`${path}: environment variable ${name} is not set`);
                return '';
            }
            return replacement;
        });
    }
    if (Array.isArray(value))
        return value.map((item, index) => interpolate(item, env, `${path}[${index}]`, problems));
    if (typeof value === 'object' && value !== null) {
        return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolate(item, env, path ? `${path}.${key}` : key, problems)]));
    }
    return value;
}
function describe(error) {
    const path = toKeyPath(error.path);
    if (error.message === 'Expected required property')
        return `${path}: required`;
    if (error.message.startsWith('Unexpected property'))
        return `${path}: unknown key (check its spelling and section)`;
    const message = error.schema.errorMessage ?? error.message.toLowerCase();
    return `${path || 'config'}: ${message}`;
}
/** `/session/encryptionKeys/1` -> `session.encryptionKeys[1]` */
function toKeyPath(pointer) {
    return pointer
        .split('/')
        .slice(1)
        .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}
function deepFreeze(value) {
    if (typeof value === 'object' && value !== null) {
        for (const item of Object.values(value))
            deepFreeze(item);
        Object.freeze(value);
    }
    return value;
}
//# sourceMappingURL=load.js.map