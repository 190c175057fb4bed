import { timingSafeEqual } from 'node:crypto';
/** How long a pending login stays valid (SPEC §4: within 10 minutes). */
export const PENDING_LOGIN_TTL_MS = 10 * 60 * 1000;
/** Sign-ins one browser may have in flight at once (several tabs); older ones are dropped. */
const MAX_PENDING = 4;
const SEAL_CONTEXT = 'pending-login';
/**
 * The pending logins of one browser live in its login cookie, sealed with
 * AES-256-GCM: nothing is stored server-side before the callback, so
 * flooding /login cannot grow memory or the store, and a login started on
 * one replica completes on any other.
 */
export class PendingLogins {
    #sealer;
    constructor(sealer) {
        this.#sealer = sealer;
    }
    /** The live pending logins in a login cookie value (none when absent, forged or expired). */
    read(cookie, now = Date.now()) {
        if (cookie === undefined)
            return [];
        const plaintext = this.#sealer.unseal(cookie, SEAL_CONTEXT);
        if (plaintext === undefined)
            return [];
        try {
            const entries = JSON.parse(plaintext);
            return entries.filter((entry) => now - entry.createdAt < PENDING_LOGIN_TTL_MS && entry.createdAt <= now);
        }
        catch {
            return [];
        }
    }
    /** The cookie value for `entries` (newest kept), or undefined when none remain. */
    write(entries) {
        if (entries.length === 0)
            return undefined;
        return this.#sealer.seal(JSON.stringify(entries.slice(-MAX_PENDING)), SEAL_CONTEXT);
    }
}
/** Finds the entry whose state equals `state`, comparing in constant time. */
export function findByState(entries, state) {
    const wanted = Buffer.from(state);
    return entries.find((entry) => {
        const candidate = Buffer.from(entry.state);
        return candidate.length === wanted.length && timingSafeEqual(candidate, wanted);
    });
}
//# sourceMappingURL=pending-login.js.map