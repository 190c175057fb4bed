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
  /** Remembers the response's `DPoP-Nonce` for `url`'s origin: the next proof to that origin carries it. */
  cacheNonce(response: { headers: Headers }, url: URL): void;
}

/** How many upstream origins' nonces are remembered (least recently used dropped): more than any route table names. */
const NONCE_ORIGINS = 256;

/** RFC 9449 §8.1: a nonce is NQCHARs (printable ASCII without `"` and `\`); longer than this is refused, not cached. */
const NONCE = /^[\x21\x23-\x5B\x5D-\x7E]{1,512}$/;

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
  /**
   * Upstream origin -> the nonce its resource server last gave (RFC 9449
   * §9, `DPoP-Nonce`): one per server, shared by every user's proofs to it,
   * so that after one `use_dpop_nonce` the next requests pass first time.
   */
  readonly #nonces = new LRUCache<string, string>({ max: NONCE_ORIGINS });

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
    if (this.#nonces.size !== 0) {
      // The origin's nonce goes into the handle's own per-origin memory, which addProof reads synchronously next.
      const nonce = this.#nonces.get(url.origin);
      if (nonce !== undefined) signer.cacheNonce({ headers: new Headers({ 'dpop-nonce': nonce }) }, url);
    }
    const headers = new Headers();
    await signer.addProof(url, headers, method, accessToken);
    return headers.get('dpop')!;
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
