import type { Config } from './schema.js';
import type { Rule } from './checks/rule.js';
import { SERVER_RULES } from './checks/server.js';
import { PROVIDER_RULES } from './checks/provider.js';
import { PROVIDERS_RULES } from './checks/providers.js';
import { SESSION_RULES, sessionWarnings } from './checks/session.js';
import { ROUTE_RULES, routeWarnings } from './checks/routes.js';
import { PAGE_RULES } from './checks/pages.js';
import { MACHINE_CLIENT_RULES, machineClientWarnings } from './checks/machine-clients.js';
import { IDENTITY_RULES } from './checks/identity.js';
import { TOKEN_TARGET_RULES } from './checks/token-targets.js';
import { SITE_RULES } from './checks/sites.js';

/** Every cross-key rule, by area (src/config/checks/<area>.ts); a new rule goes into its area's list. */
const RULES: readonly Rule[] = [...SERVER_RULES, ...PROVIDER_RULES, ...PROVIDERS_RULES, ...SESSION_RULES, ...ROUTE_RULES, ...TOKEN_TARGET_RULES, ...PAGE_RULES, ...MACHINE_CLIENT_RULES, ...IDENTITY_RULES, ...SITE_RULES];

/**
 * Settings that work but do not do what they seem to: `gatehouse check`
 * prints each as `warning: key: ...` on stderr, and the gateway logs them at
 * start-up.
 * @example configWarnings(config) // ['session.idleTimeout: 48h is longer than session.ttl (24h): ...']
 */
export function configWarnings(config: Config): string[] {
  return [...sessionWarnings(config), ...routeWarnings(config), ...machineClientWarnings(config)];
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
