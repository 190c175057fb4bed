import type { RouteConfig } from '../config/schema.js';

type ClaimValue = string | number | boolean;

/** A route's `allow`, compiled: every condition given must hold. */
export interface Allow {
  /** Lower-case domains the `email` claim may end in (after the @). */
  emailDomains: ReadonlySet<string> | undefined;
  /** `allow.allowUnverifiedEmail`: an email without `email_verified` may match (an explicit false never does). */
  allowUnverifiedEmail: boolean;
  /** Claim name -> the values one of which it must hold (an array claim: any of its elements). */
  claims: ReadonlyArray<readonly [string, readonly ClaimValue[]]>;
}

export function compileAllow(allow: NonNullable<RouteConfig['allow']>): Allow {
  return {
    emailDomains: allow.emailDomains === undefined ? undefined : new Set(allow.emailDomains.map((domain) => domain.toLowerCase())),
    allowUnverifiedEmail: allow.allowUnverifiedEmail ?? false,
    claims: Object.entries(allow.claims ?? {}),
  };
}

/**
 * Whether a signed-in user, by the claims of their last sign-in or refresh,
 * may pass a route's `allow` (README "Routes"). An email matches a domain
 * only when it has exactly one `@`, its domain equals one of the list in
 * lower case, and `email_verified` is true (boolean or the string "true";
 * absent passes only with `allowUnverifiedEmail`), as oauth2-proxy after
 * GHSA-c5c4-8r6x-56w3.
 * @example isAllowed(compileAllow({ claims: { groups: ['admins'] } }), { groups: ['staff', 'admins'] }) // true
 */
export function isAllowed(allow: Allow, claims: Readonly<Record<string, unknown>>): boolean {
  if (allow.emailDomains !== undefined && !hasAllowedEmail(allow, allow.emailDomains, claims)) return false;
  return allow.claims.every(([name, values]) => holdsOneOf(claims[name], values));
}

function hasAllowedEmail(allow: Allow, domains: ReadonlySet<string>, claims: Readonly<Record<string, unknown>>): boolean {
  const { email, email_verified: verified } = claims;
  if (typeof email !== 'string') return false;
  if (!(verified === true || verified === 'true' || (verified === undefined && allow.allowUnverifiedEmail))) return false;
  const at = email.indexOf('@');
  // `m@evil.example@example.com` is no address of example.com: exactly one @, a local part before it.
  if (at <= 0 || email.indexOf('@', at + 1) >= 0) return false;
  return domains.has(email.slice(at + 1).toLowerCase());
}

function holdsOneOf(claim: unknown, values: readonly ClaimValue[]): boolean {
  if (Array.isArray(claim)) return claim.some((element) => values.includes(element as ClaimValue));
  return values.includes(claim as ClaimValue);
}
