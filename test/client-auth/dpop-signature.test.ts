import t from 'tap';
import { generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { joseSignature } from '../../src/oauth/dpop.js';

/**
 * DPoP proofs are signed with node:crypto in DER and turned into the JWS
 * form r || s (RFC 7518 §3.4) by src/oauth/dpop.ts. Across enough
 * signatures both odd shapes of a DER integer occur: 33 bytes (a leading
 * zero before a high bit, about half of them) and shorter than 32 bytes
 * (about 1 in 256); each must verify as IEEE P1363.
 */
t.test('every DER signature becomes a 64-byte r || s that verifies', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const shapes = { long: 0, short: 0 };
  let failed = 0;
  for (let i = 0; i < 4000; i += 1) {
    const data = randomBytes(64);
    const der = sign('sha256', data, privateKey);
    const rLength = der[3]!;
    const sLength = der[5 + rLength]!;
    for (const length of [rLength, sLength]) {
      if (length === 33) shapes.long += 1;
      if (length < 32) shapes.short += 1;
    }
    const jose = joseSignature(der);
    if (jose.length !== 64 || !verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose)) failed += 1;
  }
  t.equal(failed, 0, 'all 4000 verify as ieee-p1363');
  t.ok(shapes.long > 0 && shapes.short > 0, `both a 33-byte and a short integer were seen (${shapes.long} / ${shapes.short})`);
});
