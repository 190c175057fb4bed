import t from 'tap';
import { randomBytes } from 'node:crypto';
import { Sealer } from '../../src/session/seal.js';
import { hashSessionId, isSessionIdShaped, newSessionId } from '../../src/session/session-id.js';

/**
 * README "Storage": tokens are encrypted at rest with AES-256-GCM under
 * session.encryptionKeys (the first encrypts, all decrypt); session ids are
 * stored only as a hash. README "What the browser sees": a session id carries at least 128 bits.
 */
const key = () => randomBytes(32).toString('base64');
/** The 4-byte fingerprint of the key that sealed a value (`v1.` then key id, IV, tag, body). */
const sealedBy = (sealed: string) => Buffer.from(sealed.slice(3), 'base64url').subarray(0, 4).toString('hex');

t.test('a sealed value opens with the same context and hides its plaintext', async (t) => {
  const sealer = new Sealer([key()]);
  const plaintext = JSON.stringify({ accessToken: 'at-secret-value', refreshToken: 'rt-secret-value', name: 'Zoë' });
  const sealed = sealer.seal(plaintext, 'tokens:alice');
  t.equal(sealer.unseal(sealed, 'tokens:alice'), plaintext);
  t.notOk(sealed.includes('secret-value'), 'no plaintext in the sealed text');
  t.notOk(Buffer.from(sealed.slice(3), 'base64url').includes('secret-value'), 'no plaintext in the sealed bytes');
  t.not(sealer.seal(plaintext, 'tokens:alice'), sealed, 'a fresh IV at every seal');
  t.equal(sealer.unseal(sealer.seal('', 'c'), 'c'), '', 'the empty string round-trips');
});

t.test('any change to a sealed value is detected', async (t) => {
  const sealer = new Sealer([key()]);
  const sealed = sealer.seal('{"userId":"alice"}', 'ctx');
  const raw = Buffer.from(sealed.slice('v1.'.length), 'base64url');
  for (let index = 0; index < raw.length; index += 1) {
    const tampered = Buffer.from(raw);
    tampered[index]! ^= 0x01;
    if (sealer.unseal(`v1.${tampered.toString('base64url')}`, 'ctx') !== undefined) {
      t.fail(`flipping a bit of byte ${index} went unnoticed`);
      return;
    }
  }
  t.pass('a flipped bit in the key id, IV, tag or ciphertext makes unseal fail');
  t.equal(sealer.unseal(`v1.${raw.subarray(0, raw.length - 1).toString('base64url')}`, 'ctx'), undefined, 'truncated');
  t.equal(sealer.unseal(`v1.${Buffer.concat([raw, Buffer.from([0])]).toString('base64url')}`, 'ctx'), undefined, 'extended');
  t.equal(sealer.unseal(`v2.${raw.toString('base64url')}`, 'ctx'), undefined, 'unknown version');
  for (const garbage of ['', 'v1.', 'v1.AAAA', 'not sealed', 'v1.!!!!', `v1.${'A'.repeat(200)}`]) {
    t.equal(sealer.unseal(garbage, 'ctx'), undefined, `garbage ${JSON.stringify(garbage.slice(0, 12))}`);
  }
});

t.test('a value sealed for one context does not open in another', async (t) => {
  const sealer = new Sealer([key()]);
  const forAlice = sealer.seal('{"accessToken":"x"}', 'tokens:alice');
  t.equal(sealer.unseal(forAlice, 'tokens:bob'), undefined, "alice's record cannot be replayed as bob's");
  t.equal(sealer.unseal(forAlice, 'pending-login'), undefined, 'a token record is no login cookie');
  t.equal(sealer.unseal(forAlice, 'tokens:alic'), undefined, 'a prefix of the context is another context');
});

t.test('keys rotate: the first seals, every key opens, a value names the key that sealed it', async (t) => {
  const oldKey = key();
  const newKey = key();
  const before = new Sealer([oldKey]);
  const sealedWithOld = before.seal('payload', 'ctx');
  t.equal(sealedBy(sealedWithOld), sealedBy(before.seal('other', 'ctx')), 'current under the only key');

  const rotated = new Sealer([newKey, oldKey]);
  t.equal(rotated.unseal(sealedWithOld, 'ctx'), 'payload', 'the old key, second in the list, still opens');
  t.not(sealedBy(sealedWithOld), sealedBy(rotated.seal('other', 'ctx')), 'a value under the old key is due for re-encryption');
  const sealedWithNew = rotated.seal('payload', 'ctx');
  t.equal(sealedBy(sealedWithNew), sealedBy(new Sealer([newKey]).seal('other', 'ctx')), 'a new seal uses the first key');
  t.equal(before.unseal(sealedWithNew, 'ctx'), undefined, 'the new key sealed it: the old key alone cannot open it');

  t.equal(new Sealer([oldKey, newKey]).unseal(sealedWithNew, 'ctx'), 'payload', 'the key list may be reordered');
  t.equal(new Sealer([newKey]).unseal(sealedWithOld, 'ctx'), undefined, 'a retired key no longer opens its values');
  t.equal(new Sealer([key()]).unseal(sealedWithNew, 'ctx'), undefined, 'an unrelated key opens nothing');
});

t.test('session ids are 256 random bits in base64url, stored only as a SHA-256 hash', async (t) => {
  const ids = new Set(Array.from({ length: 1000 }, () => newSessionId()));
  t.equal(ids.size, 1000, 'no repeats');
  for (const id of [...ids].slice(0, 20)) {
    t.match(id, /^[A-Za-z0-9_-]{43}$/);
    t.equal(Buffer.from(id, 'base64url').length, 32, 'at least 128 bits: 32 random bytes');
    t.ok(isSessionIdShaped(id));
  }
  const id = newSessionId();
  const hash = hashSessionId(id);
  t.equal(hash, hashSessionId(id), 'the hash is stable');
  t.match(hash, /^[A-Za-z0-9_-]{43}$/);
  t.not(hash, id, 'the hash is not the id');
  t.not(hashSessionId(newSessionId()), hash);
  for (const bad of ['', 'short', `${id}x`, id.slice(1), `${id.slice(1)}=`, `${id.slice(1)}.`, 'a'.repeat(43).replace(/a$/, '+')]) {
    t.notOk(isSessionIdShaped(bad), `not an id: ${JSON.stringify(bad)}`);
  }
});
