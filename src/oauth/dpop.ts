import { webcrypto } from 'node:crypto';
import * as oidc from 'openid-client';
import { LRUCache } from 'lru-cache';
import type { Provider } from './provider.js';
import type { DpopKey } from '../session/store.js';

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/**
 * openid-client's DPoP handle also signs proofs for requests it does not
 * send itself: the same method it uses on its own requests (htm, htu
 * without query and fragment, ath, its cached nonce), pinned by
 * test/client-auth/dpop.test.ts, where a validating upstream checks them.
 */
interface ProofSigner {
  addProof(url: URL, headers: Headers, htm: string, accessToken?: string): Promise<void>;
}

/**
 * DPoP (RFC 9449) for the gateway: one key pair per user, proofs on token
 * and refresh requests through openid-client (which answers a server's
 * `use_dpop_nonce` by retrying once with the nonce), and a fresh proof on
 * every proxied request. Imported keys are cached by their public half, so
 * the hot path costs one signature, not an import.
 */
export class DpopKeys {
  readonly #provider: Provider;
  readonly #handles: LRUCache<string, Promise<oidc.DPoPHandle>>;

  constructor(provider: Provider, cacheSize: number) {
    this.#provider = provider;
    this.#handles = new LRUCache({ max: cacheSize });
  }

  /** A new ES256 key pair for a sign-in: its JWK for the record and the handle that signs with it. */
  async generate(): Promise<{ key: DpopKey; handle: oidc.DPoPHandle }> {
    const pair = await oidc.randomDPoPKeyPair('ES256', { extractable: true });
    const jwk = (await webcrypto.subtle.exportKey('jwk', pair.privateKey)) as webcrypto.JsonWebKey;
    const key: DpopKey = { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, d: jwk.d! };
    return { key, handle: await this.handle(key) };
  }

  /** The handle that signs with `key`; the private key is imported non-extractable. */
  handle(key: DpopKey): Promise<oidc.DPoPHandle> {
    const id = `${key.x}.${key.y}`;
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
   * the access token it is sent with (§7.1).
   */
  async proof(key: DpopKey, method: string, url: URL, accessToken: string): Promise<string> {
    const signer = (await this.handle(key)) as unknown as ProofSigner;
    const headers = new Headers();
    await signer.addProof(url, headers, method, accessToken);
    return headers.get('dpop')!;
  }
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
