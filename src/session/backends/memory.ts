import Keyv from 'keyv';
import { readSessionTwice, type Backend } from './backend.js';
import { NAMESPACE } from '../keys.js';

/**
 * A backend in this process's memory: sessions end with the process
 * (`memory://`). Keyv drops an expired entry only when it is read again, so
 * `sweep` (run by the store every 10 minutes) deletes the rest: state
 * markers, logout-token `jti`s and sessions never used again would otherwise
 * pile up for the process's life (test/store/memory-store.test.ts).
 */
export function openMemory(): Backend {
  const map = new Map<string, unknown>();
  const keyv = new Keyv({ store: map, namespace: NAMESPACE, throwOnErrors: true });
  return {
    keyv,
    readSession: readSessionTwice(keyv),
    shared: false,
    count: async (prefix) => {
      const now = Date.now();
      let live = 0;
      for (const [key, raw] of map) {
        if (!key.startsWith(`${NAMESPACE}:${prefix}`)) continue;
        const expires = (JSON.parse(raw as string) as { expires?: number | null }).expires;
        if (!expires || expires > now) live += 1;
      }
      return live;
    },
    sweep: async () => {
      const now = Date.now();
      for (const [key, raw] of map) {
        const expires = (JSON.parse(raw as string) as { expires?: number | null }).expires;
        if (expires && expires <= now) map.delete(key);
      }
    },
  };
}
