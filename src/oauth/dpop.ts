import { createHash, createPrivateKey, randomUUID, sign, webcrypto, type KeyObject } from 'node:crypto';
import * as oidc from 'openid-client';
import { LRUCache } from 'lru-cache';
import type { Provider } from './provider.js';
import type { DpopKey } from '../session/store.js';

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
/** RFC 7518 §3.4: an ES256 signature is r || s, each 32 bytes. */
const COORDINATE_BYTES = 32;

/**
 * What a proxied request's proof needs of one key, prepared once: the
 * private key imported as a KeyObject (node:crypto signs synchronously, in
 * a few tens of microseconds; WebCrypto hands every signature to the thread
 * pool and back), the encoded protected header with the public JWK, and
 * the `ath` of the last access token it signed for.
 */
interface ProofKey {
  privateKey: KeyObject;
  /** base64url(JSON header) + '.' */
  header: string;
  token: string;
  ath: string;
}

/** How many upstream origins' nonces are remembered (least recently used dropped): more than any route table names. */
const NONCE_ORIGINS = 256;

/** RFC 9449 §8.1: a nonce is NQCHARs (printable ASCII without `"` and `\`); longer than this is refused, not cached. */
const NONCE = /^[\x21\x23-\x5B\x5D-\x7E]{1,512}$/;

/**
 * DPoP (RFC 9449) for the gateway: one key pair per user, proofs on token
 * and refresh requests through openid-client (which answers a server's
 * `use_dpop_nonce` by retrying once with the nonce), and a fresh proof on
 * every proxied request, signed here (the `dpop` row of `npm run bench`): the same
 * claims openid-client signs (test/client-auth/dpop.test.ts, where a
 * validating upstream checks them), with a new `jti` and `iat` each time.
 * Imported keys are cached by their public half (bounded like the session
 * cache), so the hot path costs one signature, not an import.
 */
export class DpopKeys {
  readonly #provider: Provider;
  readonly #handles: LRUCache<string, Promise<oidc.DPoPHandle>>;
  readonly #proofKeys: LRUCache<string, ProofKey>;
  /**
   * Upstream origin -> the nonce its resource server last gave (RFC 9449
   * §9, `DPoP-Nonce`): one per server, shared by every user's proofs to it,
   * so that after one `use_dpop_nonce` the next requests pass first time.
   */
  readonly #nonces = new LRUCache<string, string>({ max: NONCE_ORIGINS });

  constructor(provider: Provider, cacheSize: number) {
    this.#provider = provider;
    this.#handles = new LRUCache({ max: cacheSize });
    this.#proofKeys = new LRUCache({ max: cacheSize });
  }

  /** A new ES256 key pair for a sign-in: its JWK for the record and the handle that signs with it. */
  async generate(): Promise<{ key: DpopKey; handle: oidc.DPoPHandle }> {
    const pair = await oidc.randomDPoPKeyPair('ES256', { extractable: true });
    const jwk = (await webcrypto.subtle.exportKey('jwk', pair.privateKey)) as webcrypto.JsonWebKey;
    const key: DpopKey = { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, d: jwk.d! };
    return { key, handle: await this.handle(key) };
  }

  /** The openid-client handle that signs the AS requests with `key`; the private key is imported non-extractable. */
  handle(key: DpopKey): Promise<oidc.DPoPHandle> {
    const id = keyId(key);
    let handle = this.#handles.get(id);
    if (!handle) {
      handle = importPair(key).then((pair) => oidc.getDPoPHandle(this.#provider.configuration, pair));
      // A failed import is not cached: the next request tries again.
      handle.catch(() => this.#handles.delete(id));
      this.#handles.set(id, handle);
    }
    return handle;
  }

  /**
   * The `DPoP` header for a request to `url` (RFC 9449 §4.2): `htm` the
   * method, `htu` the URL without query and fragment, `ath` the hash of
   * the access token it is sent with (§7.1), the `nonce` the origin's
   * server last gave (§9), a new `jti` and the current `iat`. Synchronous:
   * no promise on the hot path.
   */
  proof(key: DpopKey, method: string, url: URL, accessToken: string): string {
    const prepared = this.#proofKey(key);
    const nonce = this.#nonces.size === 0 ? undefined : this.#nonces.get(url.origin);
    if (prepared.token !== accessToken) {
      prepared.ath = createHash('sha256').update(accessToken).digest('base64url');
      prepared.token = accessToken;
    }
    const claims = {
      iat: Math.floor(Date.now() / 1000),
      jti: randomUUID(),
      htm: method,
      nonce,
      htu: `${url.origin}${url.pathname}`,
      ath: prepared.ath,
    };
    const input = `${prepared.header}${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    return `${input}.${joseSignature(sign('sha256', Buffer.from(input), prepared.privateKey)).toString('base64url')}`;
  }

  /**
   * Keeps the nonce an upstream gave in its `DPoP-Nonce` header (RFC 9449
   * §9) for the proofs that follow to `origin`; false when the value is not
   * a nonce (nothing kept).
   */
  rememberNonce(origin: string, nonce: string): boolean {
    if (!NONCE.test(nonce)) return false;
    this.#nonces.set(origin, nonce);
    return true;
  }

  #proofKey(key: DpopKey): ProofKey {
    const id = keyId(key);
    let prepared = this.#proofKeys.get(id);
    if (prepared === undefined) {
      const { kty, crv, x, y, d } = key;
      const header = { alg: 'ES256', typ: 'dpop+jwt', jwk: { kty, crv, x, y } };
      prepared = {
        privateKey: createPrivateKey({ key: { kty, crv, x, y, d }, format: 'jwk' }),
        header: `${Buffer.from(JSON.stringify(header)).toString('base64url')}.`,
        token: '',
        ath: '',
      };
      this.#proofKeys.set(id, prepared);
    }
    return prepared;
  }
}

/**
 * An ECDSA P-256 signature as DER (`SEQUENCE { INTEGER r, INTEGER s }`, what
 * node:crypto gives) turned into JWS form, r || s (RFC 7518 §3.4). Node can
 * sign with `dsaEncoding: 'ieee-p1363'`, but passing `sign` an options object
 * costs about twice the signature itself (Node 24: ~75 µs against ~35 µs);
 * a DER integer is at most 33 bytes here (a leading zero) and may be shorter
 * than 32 (pinned by test/client-auth/dpop-signature.test.ts).
 */
export function joseSignature(der: Buffer): Buffer {
  const out = Buffer.alloc(2 * COORDINATE_BYTES);
  // der[0] is the SEQUENCE tag and der[1] its length (< 128 for P-256): r's INTEGER starts at 2.
  const rLength = der[3]!;
  const sAt = 4 + rLength;
  const sLength = der[sAt + 1]!;
  copyInteger(der.subarray(4, sAt), out, 0);
  copyInteger(der.subarray(sAt + 2, sAt + 2 + sLength), out, COORDINATE_BYTES);
  return out;
}

/** A DER integer's big-endian bytes right-aligned in 32 bytes at `at` (a sign byte dropped, short ones zero-padded). */
function copyInteger(integer: Buffer, out: Buffer, at: number): void {
  const bytes = integer.length > COORDINATE_BYTES ? integer.subarray(integer.length - COORDINATE_BYTES) : integer;
  bytes.copy(out, at + COORDINATE_BYTES - bytes.length);
}

function keyId(key: DpopKey): string {
  return `${key.x}.${key.y}`;
}

async function importPair(key: DpopKey): Promise<oidc.CryptoKeyPair> {
  const { d, ...publicJwk } = key;
  const [privateKey, publicKey] = await Promise.all([
    webcrypto.subtle.importKey('jwk', { ...publicJwk, d }, ALGORITHM, false, ['sign']),
    // openid-client puts the public key in each proof's header, so it must be extractable.
    webcrypto.subtle.importKey('jwk', publicJwk, ALGORITHM, true, ['verify']),
  ]);
  return { privateKey, publicKey } as oidc.CryptoKeyPair;
}
