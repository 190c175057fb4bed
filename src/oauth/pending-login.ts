import { timingSafeEqual } from 'node:crypto';
import type { Sealer } from '../session/seal.js';
import { systemClock, type Clock } from '../clock.js';
import type { StepUpRequirement } from './step-up.js';

/** A sign-in started by this browser and not yet completed. */
export interface PendingLogin {
  state: string;
  codeVerifier: string;
  nonce?: string;
  returnTo: string;
  /** The provider the sign-in goes to, which must complete it (README "Several identity providers"); absent: `default`. */
  provider?: string;
  /**
   * The step-up this sign-in asked for (README "Step-up"). Kept here, sealed,
   * not read back from the URL: the callback verifies the ID token against
   * it, so a requirement stripped from the authorization request fails
   * instead of passing as a plain sign-in.
   */
  stepUp?: StepUpRequirement;
  /** ms since the epoch */
  createdAt: number;
}

/** How long a pending login stays valid (README "What the browser sees": within 10 minutes). */
export const PENDING_LOGIN_TTL_MS = 10 * 60 * 1000;
/** Sign-ins one browser may have in flight at once (several tabs); older ones are dropped. */
const MAX_PENDING = 4;
const SEAL_CONTEXT = 'pending-login';
/**
 * Browsers keep a cookie only when its name, value and attributes fit in
 * 4,096 bytes (RFC 6265 §6.1); a larger one is dropped silently, and with it
 * every pending login of the browser. The budget for the value leaves room
 * for the attributes (about 60 bytes) and a cookie name up to 128 bytes.
 */
export const LOGIN_COOKIE_BUDGET = 4096 - 60 - 128;

/**
 * The pending logins of one browser live in its login cookie, sealed with
 * AES-256-GCM: nothing is stored server-side before the callback, so
 * flooding /login cannot grow memory or the store, and a login started on
 * one replica completes on any other.
 */
export class PendingLogins {
  readonly #sealer: Sealer;
  readonly #clock: Clock;

  /** @param clock the gateway's clock: what "expired" is measured against */
  constructor(sealer: Sealer, clock: Clock = systemClock) {
    this.#sealer = sealer;
    this.#clock = clock;
  }

  /** The live pending logins in a login cookie value (none when absent, forged or expired). */
  read(cookie: string | undefined, now = this.#clock.now()): PendingLogin[] {
    if (cookie === undefined) return [];
    const plaintext = this.#sealer.unseal(cookie, SEAL_CONTEXT);
    if (plaintext === undefined) return [];
    try {
      const entries = JSON.parse(plaintext) as PendingLogin[];
      return entries.filter((entry) => now - entry.createdAt < PENDING_LOGIN_TTL_MS && entry.createdAt <= now);
    } catch {
      return [];
    }
  }

  /**
   * The cookie value for `entries` (newest kept), or undefined when none
   * remain. Older entries are dropped until the value fits `budget` bytes, so
   * a page that sends the browser to `/login` with long `returnTo` values
   * cannot push the cookie past what browsers keep and break the user's own
   * sign-in (test/unit/pending-login.test.ts); a newest entry too large on
   * its own returns to `fallbackReturnTo` instead.
   */
  write(entries: PendingLogin[], fallbackReturnTo = '/', budget = LOGIN_COOKIE_BUDGET): string | undefined {
    if (entries.length === 0) return undefined;
    let kept = entries.slice(-MAX_PENDING);
    for (;;) {
      const value = this.#sealer.seal(JSON.stringify(kept), SEAL_CONTEXT);
      if (value.length <= budget) return value;
      if (kept.length > 1) kept = kept.slice(1);
      else if (kept[0]!.returnTo !== fallbackReturnTo) kept = [{ ...kept[0]!, returnTo: fallbackReturnTo }];
      else return value;
    }
  }
}

/** Finds the entry whose state equals `state`, comparing in constant time. */
export function findByState(entries: PendingLogin[], state: string): PendingLogin | undefined {
  const wanted = Buffer.from(state);
  return entries.find((entry) => {
    const candidate = Buffer.from(entry.state);
    return candidate.length === wanted.length && timingSafeEqual(candidate, wanted);
  });
}
