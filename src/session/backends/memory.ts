import Keyv from 'keyv';
import type { Backend } from './backend.js';
import { NAMESPACE } from '../keys.js';

/** A backend in this process's memory: sessions end with the process (`memory://`). */
export function openMemory(): Backend {
  const map = new Map<string, unknown>();
  const keyv = new Keyv({ store: map, namespace: NAMESPACE, throwOnErrors: true });
  return {
    keyv,
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
  };
}
