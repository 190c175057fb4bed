/**
 * Step-up authentication (README "Step-up"): what a route, or an
 * upstream's RFC 9470 challenge, asks of the sign-in behind a session, how
 * that is asked of the authorization server, and whether a sign-in met it.
 * Pure functions: no I/O, no clock of their own.
 */

import { ACR_PATTERN } from '../config/schema.js';

/** What a sign-in must have been to pass: one of `acr`, and/or at most `maxAge` seconds ago. */
export interface StepUpRequirement {
  /** Acceptable `acr` values, in order of preference (OpenID Connect Core §3.1.2.1 `acr_values`). */
  readonly acr?: readonly string[];
  /** Seconds: the sign-in's `auth_time` may be at most this old (`max_age`). */
  readonly maxAge?: number;
}

/** How a session was signed in: the ID token's `acr` and `auth_time` (seconds since the epoch). */
export interface SignInStrength {
  acr?: string;
  authTime?: number;
}

/** The error code of RFC 9470 §3: the authentication behind the token is not enough. */
export const INSUFFICIENT_USER_AUTHENTICATION = 'insufficient_user_authentication';

const ACR = new RegExp(ACR_PATTERN);
const MAX_ACR_VALUES = 10;
const MAX_ACR_LENGTH = 256;
/** A `max_age` over ten years is no limit at all; larger numbers are refused rather than overflow anything. */
const MAX_MAX_AGE = 10 * 365 * 24 * 3600;
const DIGITS = /^[0-9]{1,10}$/;

/**
 * Whether a sign-in meets `requirement`: its `acr` is one of the list, and
 * its `auth_time` is at most `maxAge` seconds before `nowMs`. A missing
 * claim never meets a requirement that names it.
 * @example meetsStepUp({ acr: ['urn:mfa'] }, { acr: 'urn:pwd' }, Date.now()) // false
 */
export function meetsStepUp(requirement: StepUpRequirement, signIn: SignInStrength, nowMs: number): boolean {
  if (requirement.acr !== undefined && (signIn.acr === undefined || !requirement.acr.includes(signIn.acr))) return false;
  if (requirement.maxAge !== undefined && (signIn.authTime === undefined || nowMs - signIn.authTime * 1000 > requirement.maxAge * 1000)) return false;
  return true;
}

/**
 * The authorization request parameters that ask for the step-up: `acr_values`
 * (space-separated, in order of preference), `max_age` and, with `maxAge`,
 * `prompt=login`, so the AS authenticates the user again even when its own
 * session is recent enough by its clock (OpenID Connect Core §3.1.2.1).
 */
export function stepUpParameters(requirement: StepUpRequirement): Record<string, string> {
  const parameters: Record<string, string> = {};
  if (requirement.acr !== undefined) parameters.acr_values = requirement.acr.join(' ');
  if (requirement.maxAge !== undefined) {
    parameters.max_age = String(requirement.maxAge);
    parameters.prompt = 'login';
  }
  return parameters;
}

/**
 * The query that carries `requirement` on a link to the login path
 * (`&acr_values=…&max_age=…`, empty for none), read back by {@link readStepUpQuery}.
 */
export function stepUpQuery(requirement: StepUpRequirement): string {
  let query = '';
  if (requirement.acr !== undefined) query += `&acr_values=${encodeURIComponent(requirement.acr.join(' '))}`;
  if (requirement.maxAge !== undefined) query += `&max_age=${requirement.maxAge}`;
  return query;
}

/**
 * The `WWW-Authenticate` value of a step-up refusal (RFC 9470 §3):
 * `Bearer error="insufficient_user_authentication", acr_values="…", max_age=…`.
 */
export function stepUpChallenge(requirement: StepUpRequirement): string {
  let challenge = `Bearer error="${INSUFFICIENT_USER_AUTHENTICATION}", error_description="A stronger or more recent sign-in is required"`;
  if (requirement.acr !== undefined) challenge += `, acr_values="${requirement.acr.join(' ')}"`;
  if (requirement.maxAge !== undefined) challenge += `, max_age=${requirement.maxAge}`;
  return challenge;
}

/**
 * A requirement from `acr_values` and `max_age` as a link or an upstream gives
 * them; undefined when neither is given; `invalid` when either is malformed
 * (too many or unprintable acr values, a max_age that is not a whole number).
 */
export function parseStepUp(acrValues: unknown, maxAge: unknown): StepUpRequirement | undefined | 'invalid' {
  if (acrValues === undefined && maxAge === undefined) return undefined;
  const requirement: { acr?: string[]; maxAge?: number } = {};
  if (acrValues !== undefined) {
    if (typeof acrValues !== 'string') return 'invalid';
    const values = acrValues.split(' ').filter((value) => value.length > 0);
    if (values.length === 0 || values.length > MAX_ACR_VALUES || values.some((value) => value.length > MAX_ACR_LENGTH || !ACR.test(value))) return 'invalid';
    requirement.acr = values;
  }
  if (maxAge !== undefined) {
    if (typeof maxAge !== 'string' || !DIGITS.test(maxAge) || Number(maxAge) > MAX_MAX_AGE) return 'invalid';
    requirement.maxAge = Number(maxAge);
  }
  return requirement;
}

/**
 * Both requirements at once, as far as they can be: `maxAge` the smaller,
 * `acr` the values both accept. When the two lists share no value the
 * route's (`base`) list stands: the gateway's own configuration is never
 * weakened by a link.
 */
export function combineStepUp(base: StepUpRequirement | undefined, extra: StepUpRequirement | undefined): StepUpRequirement | undefined {
  if (base === undefined) return extra;
  if (extra === undefined) return base;
  let acr = base.acr ?? extra.acr;
  if (base.acr !== undefined && extra.acr !== undefined) {
    const shared = base.acr.filter((value) => extra.acr!.includes(value));
    acr = shared.length > 0 ? shared : base.acr;
  }
  const maxAge = base.maxAge === undefined ? extra.maxAge : extra.maxAge === undefined ? base.maxAge : Math.min(base.maxAge, extra.maxAge);
  return { ...(acr === undefined ? {} : { acr }), ...(maxAge === undefined ? {} : { maxAge }) };
}

/**
 * The step-up an upstream asks for in a `WWW-Authenticate` header (RFC 9470
 * §3): its `Bearer` challenge with `error="insufficient_user_authentication"`
 * and `acr_values` and/or `max_age`. Undefined for any other header, or one
 * naming neither (nothing to ask the AS for) or malformed values.
 * @example upstreamStepUp('Bearer error="insufficient_user_authentication", max_age=5') // { maxAge: 5 }
 */
export function upstreamStepUp(header: string | string[] | undefined): StepUpRequirement | undefined {
  if (header === undefined) return undefined;
  for (const value of Array.isArray(header) ? header : [header]) {
    if (!value.includes(INSUFFICIENT_USER_AUTHENTICATION)) continue;
    const params = bearerParams(value);
    if (params?.get('error') !== INSUFFICIENT_USER_AUTHENTICATION) continue;
    const requirement = parseStepUp(params.get('acr_values'), params.get('max_age'));
    if (requirement !== undefined && requirement !== 'invalid') return requirement;
  }
  return undefined;
}

/**
 * The auth-params of the `Bearer` challenge in a WWW-Authenticate value
 * (RFC 9110 §11.6.1: `scheme param=value, param="quoted", …`, several
 * challenges separated by commas). Undefined when there is no Bearer challenge.
 */
function bearerParams(header: string): Map<string, string> | undefined {
  let index = 0;
  let params: Map<string, string> | undefined;
  const length = header.length;
  const skip = (chars: string) => {
    while (index < length && chars.includes(header[index]!)) index += 1;
  };
  const token = () => {
    const start = index;
    while (index < length && !' \t,="'.includes(header[index]!)) index += 1;
    return header.slice(start, index);
  };
  while (index < length) {
    skip(' \t,');
    const name = token();
    if (name === '') {
      index += 1;
      continue;
    }
    skip(' \t');
    if (header[index] !== '=') {
      // A new challenge's scheme; params that follow belong to it.
      if (params !== undefined) return params;
      if (name.toLowerCase() === 'bearer') params = new Map();
      continue;
    }
    index += 1;
    skip(' \t');
    let value: string;
    if (header[index] === '"') {
      index += 1;
      value = '';
      while (index < length && header[index] !== '"') {
        if (header[index] === '\\') index += 1;
        value += header[index] ?? '';
        index += 1;
      }
      index += 1;
    } else value = token();
    if (params !== undefined && !params.has(name.toLowerCase())) params.set(name.toLowerCase(), value);
  }
  return params;
}
