import { randomBytes } from 'node:crypto';
import { sha256Base64url } from '../hash.js';
import type { SessionStore } from '../session/store.js';
import type { Clock } from '../clock.js';
import type { Site } from '../access/sites.js';

/** How long a hand-off code may wait for its use (README "Several sites"). */
export const HANDOFF_TTL_MS = 60_000;

/** A code is 32 random bytes, base64url: exactly this many characters. */
const CODE_LENGTH = 43;
const CODE_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** What a hand-off code stands for: the sign-in host's session, to be copied to one site. */
export interface Handoff {
  /** The site (`Site.name`) the code may be used on, and nowhere else. */
  host: string;
  /** The user's record key. */
  userId: string;
  /** The sign-in host's session (its hash): the site's session is linked to it, and ends with it. */
  signIn: string;
  /** The path (and query) on the site to return to. */
  returnTo: string;
  /** When the code stops being valid, ms since the epoch. */
  expiresAt: number;
}

/**
 * One-time hand-off codes from the sign-in host to a site (README "Several
 * sites"): valid 60 s, bound to one host, usable once on every replica
 * sharing the store. The store keeps the code's hash only; its single use
 * is the store's claim (Redis SET NX, or a lock on one replica), the same
 * that makes an OAuth `state` single-use.
 */
export class Handoffs {
  constructor(
    private readonly store: SessionStore,
    private readonly clock: Clock,
  ) {}

  /** A new code for `handoff` (without its expiry, which is set here). */
  async issue(handoff: Omit<Handoff, 'expiresAt'>): Promise<string> {
    const code = randomBytes(32).toString('base64url');
    const record: Handoff = { ...handoff, expiresAt: this.clock.now() + HANDOFF_TTL_MS };
    await this.store.saveLink(linkName(code), JSON.stringify(record), HANDOFF_TTL_MS);
    return code;
  }

  /**
   * The hand-off `code` stands for, taken: a second take, on this replica or
   * any other, gets null, as do an unknown, malformed or expired code.
   */
  async take(code: unknown): Promise<Handoff | null> {
    if (typeof code !== 'string' || code.length !== CODE_LENGTH || !CODE_SHAPE.test(code)) return null;
    const name = linkName(code);
    const stored = await this.store.getLink(name);
    if (stored === null) return null;
    // The claim is what makes the take atomic across replicas: only its first caller proceeds.
    if (!(await this.store.claimOnce(name, HANDOFF_TTL_MS))) return null;
    let record: Handoff;
    try {
      record = JSON.parse(stored) as Handoff;
    } catch {
      return null;
    }
    if (typeof record.expiresAt !== 'number' || record.expiresAt <= this.clock.now()) return null;
    return record;
  }
}

/** The URL on `site` that takes `code` (README "Several sites": `paths.handoff`). */
export function handoffUrl(site: Site, path: string, code: string): string {
  return `${site.origin}${path}?code=${code}`;
}

function linkName(code: string): string {
  return `handoff:${sha256Base64url(code)}`;
}
