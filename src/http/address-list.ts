import { BlockList, isIP } from 'node:net';
import { parseAddressEntry } from '../config/addresses.js';

/** An IPv4 address as Node reports it on a dual-stack socket (RFC 4291 §2.5.5.2). */
const V4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;

/**
 * Addresses and CIDRs (`10.0.0.5`, `10.0.0.0/8`, `::1`, `fd00::/8`), as
 * `server.trustProxy` and `forwardAuth.trustedProxies` list them. An IPv4
 * address seen on a dual-stack socket (`::ffff:10.0.0.5`) matches as IPv4.
 * @example new AddressList(['127.0.0.1', '10.0.0.0/8']).has('::ffff:10.1.2.3') // true
 */
export class AddressList {
  readonly #list = new BlockList();

  /** @throws Error on an entry that is not an address or a CIDR (config validation checks it first: src/config/addresses.ts). */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const parsed = parseAddressEntry(entry);
      if (parsed === undefined) throw new Error(`not an address or CIDR: ${entry}`);
      if (parsed.prefix === undefined) this.#list.addAddress(parsed.address, parsed.family);
      else this.#list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
  }

  has(address: string | undefined): boolean {
    if (address === undefined) return false;
    const v4 = V4_MAPPED.exec(address)?.[1];
    if (v4 !== undefined) return this.#list.check(v4, 'ipv4');
    const family = isIP(address);
    return family !== 0 && this.#list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}
