import type { Adapter, AdapterFactory, AdapterPayload } from 'oidc-provider';

const GRANTABLE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest', 'PreAuthorizedCode']);

interface Entry {
  payload: AdapterPayload;
  /** ms since the epoch; Infinity when the object does not expire. */
  expiresAt: number;
}

/**
 * An in-memory oidc-provider adapter without a size bound, for the bench's
 * authorization server. oidc-provider's own development adapter keeps about
 * 1,000 objects in an LRU, so a few hundred sign-ins (each a session, a
 * grant, an interaction, a code, tokens) silently drop the oldest grants, and
 * their refresh tokens then fail with `invalid_grant`. Same semantics
 * otherwise: expiry on read, `consume` marks, revocation by grant.
 */
export function unboundedMemoryAdapter(): AdapterFactory {
  const entries = new Map<string, Entry>();
  const sessionsByUid = new Map<string, string>();
  const idsByUserCode = new Map<string, string>();
  const grants = new Map<string, Set<string>>();

  const read = (key: string): AdapterPayload | undefined => {
    const entry = entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      entries.delete(key);
      return undefined;
    }
    return entry.payload;
  };

  return (model: string): Adapter => {
    const keyOf = (id: string) => `${model}:${id}`;
    return {
      async upsert(id, payload, expiresIn) {
        const key = keyOf(id);
        entries.set(key, { payload, expiresAt: typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : Infinity });
        if (model === 'Session' && payload.uid !== undefined) sessionsByUid.set(payload.uid, id);
        if (payload.userCode !== undefined) idsByUserCode.set(payload.userCode, id);
        if (GRANTABLE.has(model) && payload.grantId !== undefined) {
          const members = grants.get(payload.grantId) ?? new Set<string>();
          members.add(key);
          grants.set(payload.grantId, members);
        }
      },
      async find(id) {
        return read(keyOf(id));
      },
      async findByUid(uid) {
        const id = sessionsByUid.get(uid);
        return id === undefined ? undefined : read(keyOf(id));
      },
      async findByUserCode(userCode) {
        const id = idsByUserCode.get(userCode);
        return id === undefined ? undefined : read(keyOf(id));
      },
      async consume(id) {
        const payload = read(keyOf(id));
        if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000);
      },
      async destroy(id) {
        const key = keyOf(id);
        const payload = entries.get(key)?.payload;
        entries.delete(key);
        if (payload?.uid !== undefined && sessionsByUid.get(payload.uid) === id) sessionsByUid.delete(payload.uid);
        if (payload?.grantId !== undefined) grants.get(payload.grantId)?.delete(key);
      },
      async revokeByGrantId(grantId) {
        for (const key of grants.get(grantId) ?? []) entries.delete(key);
        grants.delete(grantId);
      },
    };
  };
}
