import { PROVIDER_NAME_PATTERN, type Config, type ProviderConfig } from '../schema.js';
import { PROVIDER_RULES } from './provider.js';
import type { Rule } from './rule.js';

/** The name `provider` has in the registry: `providers` may not use it (README "Several identity providers"). */
export const DEFAULT_PROVIDER = 'default';

const NAME = new RegExp(PROVIDER_NAME_PATTERN);

/**
 * `providers`: each entry is checked as `provider` is, by the same rules,
 * each problem named `providers.NAME.key`. A rule is skipped for an entry
 * when one of the keys it reads is already wrong there, as for `provider`.
 */
export const PROVIDERS_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ providers }) {
      return providers !== undefined && Object.hasOwn(providers, DEFAULT_PROVIDER)
        ? [`providers.${DEFAULT_PROVIDER}: the name default is the top-level provider; give this provider another name`]
        : [];
    },
  },
  {
    reads: [],
    check({ providers }) {
      return Object.keys(providers ?? {})
        .filter((name) => !NAME.test(name))
        .map((name) => `providers.${name}: a provider name is 1 to 63 letters, digits, dots, dashes or underscores, starting with a letter or digit`);
    },
  },
  {
    reads: [],
    check(config) {
      return Object.entries(config.providers ?? {}).flatMap(([name, settings]) => entryProblems(config, name, settings));
    },
  },
];

/** The `provider` rules run against one entry, their keys renamed from `provider.` to `providers.NAME.`. */
function entryProblems(config: Config, name: string, settings: ProviderConfig): string[] {
  const asProvider = { ...config, provider: settings };
  const problems: string[] = [];
  for (const rule of PROVIDER_RULES) {
    const found = rule.check(asProvider);
    problems.push(...found.map((problem) => renamed(problem, name)));
  }
  return problems;
}

/** `provider.issuer: required (or give provider.tokenEndpoint ...)` -> `providers.partners.issuer: required (or give providers.partners.tokenEndpoint ...)`. */
function renamed(problem: string, name: string): string {
  return problem.replace(/\bprovider\.(?=[A-Za-z])/g, `providers.${name}.`);
}
