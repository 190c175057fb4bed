import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

/** A valid 32-byte key, base64. */
export const KEY = randomBytes(32).toString('base64');

/** The smallest valid document: an issuer, a client id and secret, and a key. */
export function minimal(): Record<string, Record<string, unknown> | string> {
  return {
    provider: { issuer: 'https://idp.example.com', clientId: 'gatehouse', clientSecret: 'client-secret' },
    session: { encryptionKeys: [KEY] },
  };
}

/** `minimal()` with sections merged one level deep (`undefined` removes a key). */
export function withKeys(extra: Record<string, Record<string, unknown> | string>): Record<string, unknown> {
  const document: Record<string, unknown> = minimal();
  for (const [section, value] of Object.entries(extra)) {
    const current = document[section];
    document[section] = typeof value === 'object' && typeof current === 'object' ? { ...current, ...value } : value;
  }
  return document;
}

/** The problem lines of a refused document; throws when it is accepted. */
export function problemsOf(document: unknown, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    loadConfig(document, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('the configuration was accepted');
}
