import type { SwitchableProxy } from './switchable-proxy.js';

/** One request of the client at the AS's back channel, as oidc-provider parsed it. */
export interface ClientRequest {
  /** `/token`, `/token/revocation`, `/request` (PAR) ... */
  path: string;
  status: number;
  /** The form parameters the AS parsed (client_assertion, client_secret, grant_type ...). */
  params: Record<string, unknown>;
  /** The DPoP proof header, when one was sent (RFC 9449 §4). */
  dpop?: string;
}

/**
 * Records every form-encoded POST the gateway sends the AS (through the
 * harness's proxy in front of it), with the parameters and the answer's
 * status: proof of how the client authenticated, read off the wire.
 * @example const seen = watchClientRequests(h.asProxy); ...; t.ok(seen.find((r) => r.path === '/token')?.params.client_assertion);
 */
export function watchClientRequests(proxy: SwitchableProxy): ClientRequest[] {
  const seen: ClientRequest[] = [];
  proxy.recorder = (exchange) => {
    if (exchange.method !== 'POST') return;
    const dpop = exchange.headers.dpop;
    seen.push({
      path: exchange.path,
      status: exchange.status,
      params: Object.fromEntries(new URLSearchParams(exchange.body)),
      ...(typeof dpop === 'string' ? { dpop } : {}),
    });
  };
  return seen;
}

/** The decoded header and payload of a compact JWS, unverified (to read `alg`, `kid`, `htu` in a test). */
export function decodeJwt(jwt: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [header, payload] = jwt.split('.');
  return {
    header: JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Record<string, unknown>,
  };
}
