import { createHash } from 'node:crypto';
import type { RouteConfig, TokenTargetConfig } from './schema.js';

/**
 * A token the gateway obtains for the upstreams of some routes rather than
 * sending them the sign-in access token (README "A token for each API"):
 * - `refresh`: a refresh grant with `resource` (RFC 8707 §2.2) and/or `scope`;
 * - `exchange`: a token exchange (RFC 8693 §2.1) of the user's sign-in token.
 */
export interface TokenTarget {
  /** Key of the target's token in the user's token record: a hash of the grant's parameters, stable across restarts and replicas. */
  id: string;
  /** What `gatehouse_token_refreshes_total{target}` and the logs call it: `name`, else its resource, audience or scopes. */
  label: string;
  kind: 'refresh' | 'exchange';
  /** RFC 8707 resource indicator sent with the grant. */
  resource: string | undefined;
  /** Space-separated scopes sent with the grant; undefined sends none. */
  scope: string | undefined;
  /** RFC 8693 `audience` (exchange only). */
  audience: string | undefined;
  /** Which of the user's tokens an exchange sends as `subject_token`. */
  subjectToken: 'access' | 'id';
}

/** What the metrics call the sign-in tokens, beside the targets' labels. */
export const SIGN_IN_TARGET = 'sign-in';

/** A target's grant parameters, in a fixed order: equal parameters are one target. */
function grantParameters(token: TokenTargetConfig): Omit<TokenTarget, 'id' | 'label'> {
  const exchange = token.exchange;
  if (exchange !== undefined) {
    return {
      kind: 'exchange',
      resource: exchange.resource,
      scope: scopeOf(exchange.scopes),
      audience: exchange.audience,
      subjectToken: exchange.subjectToken,
    };
  }
  return { kind: 'refresh', resource: token.resource, scope: scopeOf(token.scopes), audience: undefined, subjectToken: 'access' };
}

function scopeOf(scopes: readonly string[] | undefined): string | undefined {
  return scopes === undefined ? undefined : [...new Set(scopes)].sort().join(' ');
}

/** The default label of a target without `name`. */
function labelOf(parameters: Omit<TokenTarget, 'id' | 'label'>): string {
  return parameters.resource ?? parameters.audience ?? parameters.scope ?? parameters.kind;
}

/** The stable key of a target's parameters. */
export function targetKey(token: TokenTargetConfig): string {
  const parameters = grantParameters(token);
  return JSON.stringify([parameters.kind, parameters.resource ?? null, parameters.scope ?? null, parameters.audience ?? null, parameters.subjectToken]);
}

/**
 * The distinct token targets of `routes`, and each route's own (by index;
 * undefined for `token: access | none`). Routes whose `token` objects ask
 * for the same grant share one target, whose name is the first given.
 * @example compileTokenTargets(config).byRoute[0]?.label // 'https://orders.example.com'
 */
export function compileTokenTargets(config: { readonly routes?: readonly RouteConfig[] | undefined }): { targets: readonly TokenTarget[]; byRoute: ReadonlyArray<TokenTarget | undefined> } {
  const byKey = new Map<string, TokenTarget>();
  const byRoute = (config.routes ?? []).map((route: RouteConfig) => {
    const token = route.token;
    if (token === undefined || typeof token === 'string') return undefined;
    const key = targetKey(token);
    let target = byKey.get(key);
    if (target === undefined) {
      const parameters = grantParameters(token);
      target = {
        id: createHash('sha256').update(key).digest('base64url').slice(0, 16),
        label: token.name ?? labelOf(parameters),
        ...parameters,
      };
      byKey.set(key, target);
    }
    return target;
  });
  return { targets: [...byKey.values()], byRoute };
}

/** The `resource` parameters and the scope of an authorization request (README "A token for each API": one consent for every target). */
export function signInAsks(providerScopes: readonly string[], targets: readonly TokenTarget[]): { scope: string; resources: string[] } {
  const scopes = new Set(providerScopes);
  const resources = new Set<string>();
  for (const target of targets) {
    if (target.resource !== undefined) resources.add(target.resource);
    for (const scope of target.scope?.split(' ') ?? []) scopes.add(scope);
  }
  return { scope: [...scopes].join(' '), resources: [...resources] };
}
