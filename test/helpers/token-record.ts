import type { TokenRecord } from '../../src/session/store.js';

/** A token record for store-level tests: fresh for a minute, one session, no claims. */
export function tokenRecord(userId: string, accessToken: string): TokenRecord {
  return {
    userId,
    accessToken,
    expiresAt: Date.now() + 60_000,
    lifetime: 60,
    claims: {},
    sessions: { h: Date.now() + 60_000 },
  };
}
