import type { FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { AddressList } from './address-list.js';

/** Fastify's `trustProxy` as a function: whether the address at `hop` (0 = the TCP peer) is a proxy of ours. */
export type TrustFunction = (address: string, hop: number) => boolean;

/**
 * Fastify's `trustProxy` for `server.trustProxy` (README "Behind nginx,
 * Caddy, Traefik or Envoy"): false, a hop count, or proxy addresses/CIDRs.
 * A hop count is given as a function because Fastify 5 turned a bare number
 * into "trust nothing". `true` never gets here: `check` refuses it, since a
 * client could then choose its own address by sending X-Forwarded-For.
 */
export function trustFunction(setting: Config['server']['trustProxy']): TrustFunction | false {
  if (setting === false) return false;
  if (setting === true) throw new Error('server.trustProxy: true is refused (see gatehouse check)');
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  const proxies = new AddressList(setting);
  return (address) => proxies.has(address);
}

/**
 * Headers in which a client, or a CDN, states the client's address. Only a
 * trusted proxy may pass them on: from anyone else they are a client's claim
 * about itself, the spoofing behind CVE-2026-40575 (oauth2-proxy).
 */
const ADDRESS_CLAIMS: ReadonlySet<string> = new Set(['forwarded', 'x-real-ip', 'true-client-ip', 'cf-connecting-ip']);

/** Request headers set anew for the upstream when the TCP peer is a trusted proxy: only the Cookie (without the gateway's own). */
export function isReplacedFromProxy(name: string): boolean {
  return name === 'cookie';
}

/** ...and when it is not: the Cookie, every X-Forwarded-* and every header that claims a client address. */
export function isReplacedFromClient(name: string): boolean {
  return name === 'cookie' || name.startsWith('x-forwarded-') || ADDRESS_CLAIMS.has(name);
}

/**
 * Which client-address headers reach the upstream, and the X-Forwarded-For it
 * gets. Built once from `server.trustProxy`; the proxy plugin asks it per request.
 */
export class ClientAddressing {
  readonly trust: TrustFunction | false;

  constructor(setting: Config['server']['trustProxy']) {
    this.trust = trustFunction(setting);
  }

  /** The `skip` predicate of `endToEndHeaders` (src/http/hop-by-hop.ts) for this request's upstream headers. */
  replacedHeaders(request: FastifyRequest): (name: string) => boolean {
    return this.trust !== false && this.trust(request.socket.remoteAddress ?? '', 0) ? isReplacedFromProxy : isReplacedFromClient;
  }

  /**
   * X-Forwarded-For for the upstream: the trusted part of the incoming chain,
   * from the client address (the first untrusted one from the right) to the
   * TCP peer, as each proxy appends its peer. What a client wrote left of
   * that is dropped.
   * @example // trustProxy 1, peer 10.0.0.2, X-Forwarded-For "6.6.6.6, 203.0.113.7" -> "203.0.113.7, 10.0.0.2"
   */
  forwardedFor(request: FastifyRequest): string {
    if (this.trust === false) return request.socket.remoteAddress ?? '';
    // Fastify builds a new array on every read of `ips`.
    return request.ips!.reverse().join(', ');
  }

  /**
   * The same for a request Fastify does not see (a WebSocket upgrade): walks
   * the chain from the TCP peer leftwards while each address is trusted, as
   * Fastify's `ips` does.
   */
  forwardedForPeer(peer: string, header: string | string[] | undefined): string {
    if (this.trust === false) return peer;
    const claimed = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((address) => address.trim())
      .filter((address) => address !== '');
    const chain = [peer];
    while (claimed.length > 0 && this.trust(chain[chain.length - 1]!, chain.length - 1)) chain.push(claimed.pop()!);
    return chain.reverse().join(', ');
  }

  /** `replacedHeaders` for a request Fastify does not see, by its TCP peer. */
  replacedHeadersOf(peer: string): (name: string) => boolean {
    return this.trust !== false && this.trust(peer, 0) ? isReplacedFromProxy : isReplacedFromClient;
  }
}
