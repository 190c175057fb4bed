import { LRUCache } from 'lru-cache';
import { gatehouseError } from '../errors.js';
/** How long the store may stay silent before it counts as unreachable for /readyz. */
export const STORE_FRESHNESS_MS = 5000;
const PING_INTERVAL_MS = 2000;
const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
/**
 * Sessions and token records behind an in-process LRU. Token records are
 * sealed with AES-256-GCM before they reach the backend; sessions are keyed by
 * the hash of their id only. Every backend failure becomes
 * GH_ERR_STORE_UNAVAILABLE, and while the backend is known to be down the
 * cache serves nothing (SPEC §6).
 */
export class SessionStore {
    #backend;
    #sealer;
    #cache;
    #locks = new Map();
    #timers = [];
    #available = true;
    #lastAnswer = Date.now();
    constructor(backend, sealer, cacheSize) {
        this.#backend = backend;
        this.#sealer = sealer;
        this.#cache = new LRUCache({ max: cacheSize });
        this.#timers.push(setInterval(() => void this.ping(), PING_INTERVAL_MS).unref());
        if (backend.sweep)
            this.#timers.push(setInterval(() => void this.#call(backend.sweep).catch(() => { }), SWEEP_INTERVAL_MS).unref());
    }
    /** Whether the backend answered within the last STORE_FRESHNESS_MS. */
    get ready() {
        return this.#available && Date.now() - this.#lastAnswer < STORE_FRESHNESS_MS;
    }
    /** Whether replicas may share this store. */
    get shared() {
        return this.#backend.shared;
    }
    /**
     * The session for a hashed id, or null when unknown or expired. An LRU hit
     * costs no I/O: this is the hot path.
     */
    async getSession(hash, now = Date.now()) {
        this.#assertAvailable();
        const cached = this.#cache.get(`s:${hash}`);
        if (cached?.kind === 'session')
            return cached.record.expiresAt > now ? cached.record : null;
        const record = (await this.#call(() => this.#backend.keyv.get(`s:${hash}`)));
        if (!record || record.expiresAt <= now)
            return null;
        this.#cache.set(`s:${hash}`, { kind: 'session', record });
        return record;
    }
    async saveSession(hash, record, now = Date.now()) {
        await this.#call(() => this.#backend.keyv.set(`s:${hash}`, record, record.expiresAt - now));
        this.#cache.set(`s:${hash}`, { kind: 'session', record });
    }
    async deleteSession(hash) {
        this.#cache.delete(`s:${hash}`);
        await this.#call(() => this.#backend.keyv.delete(`s:${hash}`));
    }
    /** The user's token record; `fromBackend` skips the cache (to re-read under a lock). */
    async getTokens(userId, fromBackend = false) {
        this.#assertAvailable();
        if (!fromBackend) {
            const cached = this.#cache.get(`t:${userId}`);
            if (cached?.kind === 'tokens')
                return cached.record;
        }
        const sealed = (await this.#call(() => this.#backend.keyv.get(`t:${userId}`)));
        const plaintext = sealed === undefined ? undefined : this.#sealer.unseal(sealed, `tokens:${userId}`);
        if (plaintext === undefined)
            return null;
        const record = JSON.parse(plaintext);
        this.#cache.set(`t:${userId}`, { kind: 'tokens', record });
        return record;
    }
    /** Writes a token record (always sealed with the first key); it lives as long as its longest session. */
    async saveTokens(record, now = Date.now()) {
        const lastExpiry = Math.max(now + 1, ...Object.values(record.sessions));
        const sealed = this.#sealer.seal(JSON.stringify(record), `tokens:${record.userId}`);
        await this.#call(() => this.#backend.keyv.set(`t:${record.userId}`, sealed, lastExpiry - now));
        this.#cache.set(`t:${record.userId}`, { kind: 'tokens', record });
    }
    async deleteTokens(userId) {
        this.#cache.delete(`t:${userId}`);
        await this.#call(() => this.#backend.keyv.delete(`t:${userId}`));
    }
    /**
     * Records `key` as used and returns true the first time only, for
     * single-use values such as an OAuth `state` (RFC 9700 §4.7.1).
     */
    async claimOnce(key, ttlMs) {
        return this.withLock(`claim:${key}`, async () => {
            const seen = await this.#call(() => this.#backend.keyv.get(`u:${key}`));
            if (seen !== undefined)
                return false;
            await this.#call(() => this.#backend.keyv.set(`u:${key}`, 1, ttlMs));
            return true;
        });
    }
    /**
     * Runs `task` while holding the lock named `name` in this process, so
     * read-modify-write of one user's record never interleaves.
     */
    async withLock(name, task) {
        const previous = this.#locks.get(name) ?? Promise.resolve();
        const current = previous.then(task, task);
        const settled = current.catch(() => { });
        this.#locks.set(name, settled);
        try {
            return await current;
        }
        finally {
            if (this.#locks.get(name) === settled)
                this.#locks.delete(name);
        }
    }
    /** Store-wide number of live sessions, where the backend can count them. */
    get countSessions() {
        const count = this.#backend.count;
        return count ? () => this.#call(() => count('s:')) : undefined;
    }
    /** Asks the backend for a key, to learn whether it answers. */
    async ping() {
        try {
            await this.#call(() => this.#backend.keyv.has('ping'));
            return true;
        }
        catch {
            return false;
        }
    }
    async close() {
        for (const timer of this.#timers)
            clearInterval(timer);
        await this.#backend.keyv.disconnect();
    }
    #assertAvailable() {
        if (!this.#available)
            throw gatehouseError('GH_ERR_STORE_UNAVAILABLE');
    }
    async #call(operation) {
        try {
            const result = await operation();
            this.#available = true;
            this.#lastAnswer = Date.now();
            return result;
        }
        catch (cause) {
            if (this.#available)
                this.#cache.clear();
            this.#available = false;
            throw gatehouseError('GH_ERR_STORE_UNAVAILABLE', { cause });
        }
    }
}
//# sourceMappingURL=store.js.map