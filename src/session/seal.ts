import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

const VERSION = 'v1';
const KEY_ID_BYTES = 4;
const IV_BYTES = 12;
const TAG_BYTES = 16;

interface SealKey {
  id: Buffer;
  /** Imported once: a raw key given to every cipher would be imported again each time (a cold session read unseals one record). */
  secret: KeyObject;
}

/**
 * AES-256-GCM sealing with a key list: the first key seals, every key
 * unseals, so keys rotate without logging anyone out. Each sealed value
 * names its key by a 4-byte fingerprint, so the list may be reordered.
 */
export class Sealer {
  readonly #keys: SealKey[];

  /** @param base64Keys validated 32-byte keys, encryption key first */
  constructor(base64Keys: readonly string[]) {
    this.#keys = base64Keys.map((key) => {
      const secret = Buffer.from(key, 'base64');
      return { id: createHash('sha256').update(secret).digest().subarray(0, KEY_ID_BYTES), secret: createSecretKey(secret) };
    });
  }

  /**
   * Encrypts `plaintext`, authenticating `context` with it so a value sealed
   * for one purpose (or one user) cannot be replayed as another.
   * @example sealer.seal(JSON.stringify(record), `tokens:${userId}`)
   */
  seal(plaintext: string, context: string): string {
    const key = this.#keys[0]!;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key.secret, iv).setAAD(Buffer.from(context));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `${VERSION}.${Buffer.concat([key.id, iv, cipher.getAuthTag(), body]).toString('base64url')}`;
  }

  /** Decrypts a sealed value, or returns undefined when it is malformed, forged or sealed under an unknown key. */
  unseal(sealed: string, context: string): string | undefined {
    if (!sealed.startsWith(`${VERSION}.`)) return undefined;
    const raw = Buffer.from(sealed.slice(VERSION.length + 1), 'base64url');
    if (raw.length < KEY_ID_BYTES + IV_BYTES + TAG_BYTES) return undefined;
    const keyId = raw.subarray(0, KEY_ID_BYTES);
    const key = this.#keys.find((candidate) => timingSafeEqual(candidate.id, keyId));
    if (!key) return undefined;
    const iv = raw.subarray(KEY_ID_BYTES, KEY_ID_BYTES + IV_BYTES);
    const tag = raw.subarray(KEY_ID_BYTES + IV_BYTES, KEY_ID_BYTES + IV_BYTES + TAG_BYTES);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.secret, iv).setAAD(Buffer.from(context)).setAuthTag(tag);
      return Buffer.concat([decipher.update(raw.subarray(KEY_ID_BYTES + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}
