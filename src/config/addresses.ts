import { isIP } from 'node:net';

/** One entry of an address list: an address, or a CIDR with its prefix length. */
export interface AddressEntry {
  address: string;
  family: 'ipv4' | 'ipv6';
  prefix?: number;
}

/**
 * Parses an address or a CIDR (`10.0.0.5`, `10.0.0.0/8`, `::1`, `fd00::/8`),
 * as `server.trustProxy` and `forwardAuth.trustedProxies` list them;
 * undefined when it is neither.
 * @example parseAddressEntry('10.0.0.0/8') // { address: '10.0.0.0', family: 'ipv4', prefix: 8 }
 */
export function parseAddressEntry(entry: string): AddressEntry | undefined {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const version = isIP(address);
  if (version === 0) return undefined;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  if (slash < 0) return { address, family };
  const bits = entry.slice(slash + 1);
  const prefix = Number(bits);
  if (!/^\d{1,3}$/.test(bits) || prefix > (version === 4 ? 32 : 128)) return undefined;
  return { address, family, prefix };
}

/**
 * Indexes of the entries that are neither an address nor a CIDR, for `key[i]: ...` config problems.
 * @example invalidAddressEntries(['10.0.0.1', 'proxy']) // [1]
 */
export function invalidAddressEntries(entries: readonly string[]): number[] {
  return entries.flatMap((entry, index) => (parseAddressEntry(entry) === undefined ? [index] : []));
}
