import type { RouteConfig } from '../config/schema.js';

type ClaimValue = string | number | boolean;

/** A route's `allow`, compiled: every condition given must hold. */
export interface Allow {
  /** Lower-case domains the `email` claim may end in (after the @). */
  emailDomains: ReadonlySet<string> | undefined;
  /** Claim name -> the values one of which it must hold (an array claim: any of its elements). */
  claims: ReadonlyArray<readonly [string, readonly ClaimValue[]]>;
}

export function compileAllow(allow: NonNullable<RouteConfig['allow']>): Allow {
  return {
    emailDomains: allow.emailDomains === undefined ? undefined : new Set(allow.emailDomains.map((domain) => domain.toLowerCase())),
    claims: Object.entries(allow.claims ?? {}),
  };
}

/**
 * Whether a signed-in user, by the claims of their last sign-in or refresh,
 * may pass a route's `allow` (README "Routes"). An email whose
 * `email_verified` is false never matches a domain.
 * @example isAllowed(compileAllow({ claims: { groups: ['admins'] } }), { groups: ['staff', 'admins'] }) // true
 */
export function isAllowed(allow: Allow, claims: Readonly<Record<string, unknown>>): boolean {
  if (allow.emailDomains !== undefined && !hasAllowedEmail(allow.emailDomains, claims)) return false;
  return allow.claims.every(([name, values]) => holdsOneOf(claims[name], values));
}

function hasAllowedEmail(domains: ReadonlySet<string>, claims: Readonly<Record<string, unknown>>): boolean {
  const { email } = claims;
  if (typeof email !== 'string' || claims.email_verified === false) return false;
  const at = email.lastIndexOf('@');
  return at > 0 && domains.has(email.slice(at + 1).toLowerCase());
}

function holdsOneOf(claim: unknown, values: readonly ClaimValue[]): boolean {
  if (Array.isArray(claim)) return claim.some((element) => values.includes(element as ClaimValue));
  return values.includes(claim as ClaimValue);
}
