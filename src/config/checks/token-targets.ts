import type { Config } from '../schema.js';
import { compileTokenTargets, SIGN_IN_TARGET, targetKey } from '../token-targets.js';
import { parseUrl, type Rule } from './rule.js';

/** `routes[].token` objects (README "A token for each API"): what a token target may hold, and one metric label per target. */
export const TOKEN_TARGET_RULES: readonly Rule[] = [
  {
    reads: ['provider.issuer', 'provider.scopes'],
    check(config) {
      return [...shapeProblems(config), ...labelProblems(config)];
    },
  },
];

/** What each route's `token` object may hold. */
function shapeProblems(config: Config): string[] {
  const problems: string[] = [];
  (config.routes ?? []).forEach((route, index) => {
    const token = route.token;
    if (token === undefined || typeof token === 'string') return;
    const key = `routes[${index}].token`;
    if (route.auth === 'public') {
      problems.push(`${key}: a token target is not allowed on a public route (it reads no session); use auth: optional to send one when signed in`);
    }
    const { exchange } = token;
    if (exchange !== undefined) {
      if (token.resource !== undefined || token.scopes !== undefined) {
        problems.push(`${key}: exchange cannot be combined with resource or scopes beside it; put them inside exchange`);
      }
      if (exchange.audience === undefined && exchange.resource === undefined) {
        problems.push(`${key}.exchange: needs audience and/or resource (RFC 8693 §2.1: whom the exchanged token is for)`);
      }
      if (exchange.resource !== undefined) problems.push(...resourceProblems(`${key}.exchange.resource`, exchange.resource));
      if (exchange.subjectToken === 'id' && (config.provider.issuer === undefined || !config.provider.scopes.includes('openid'))) {
        problems.push(`${key}.exchange.subjectToken: id needs an OpenID provider (provider.issuer and the openid scope) to issue ID tokens`);
      }
    } else if (token.resource === undefined && token.scopes === undefined) {
      problems.push(`${key}: needs resource and/or scopes, or exchange`);
    }
    if (token.resource !== undefined) problems.push(...resourceProblems(`${key}.resource`, token.resource));
  });
  return problems;
}

/**
 * Two targets under one label would add up in one series of
 * gatehouse_token_refreshes_total; one target under two names would be
 * counted under only one of them; `sign-in` is the sign-in tokens' own.
 */
function labelProblems(config: Config): string[] {
  const problems: string[] = [];
  const labels = new Map<string, string>();
  const names = new Map<string, { name: string | undefined; index: number }>();
  const { byRoute } = compileTokenTargets(config);
  (config.routes ?? []).forEach((route, index) => {
    const token = route.token;
    const target = byRoute[index];
    if (token === undefined || typeof token === 'string' || target === undefined) return;
    const key = targetKey(token);
    const named = names.get(key);
    if (named === undefined) names.set(key, { name: token.name, index });
    else if (token.name !== undefined && named.name !== undefined && token.name !== named.name) {
      problems.push(`routes[${index}].token.name: routes[${named.index}] asks for the same token as ${named.name}; give both the same name`);
    }
    const owner = labels.get(target.label);
    if (target.label === SIGN_IN_TARGET) problems.push(`routes[${index}].token.name: ${SIGN_IN_TARGET} names the sign-in tokens in the metrics; choose another name`);
    else if (owner === undefined) labels.set(target.label, key);
    else if (owner !== key) {
      problems.push(`routes[${index}].token: another token target is also called ${target.label} (in gatehouse_token_refreshes_total); give one a distinct name`);
    }
  });
  return problems;
}

/** RFC 8707 §2: a resource indicator is an absolute URI without a fragment. */
function resourceProblems(key: string, value: string): string[] {
  const url = parseUrl(value);
  if (url === undefined || !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(value)) return [`${key}: must be an absolute URI such as https://orders.example.com (RFC 8707)`];
  if (value.includes('#')) return [`${key}: must not contain a fragment (RFC 8707 §2)`];
  return [];
}
