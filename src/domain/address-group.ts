/**
 * The unit an address-based limit counts (the anonymous quota, failed logins per address, open
 * streams per address): an IPv4 address itself, an IPv6 address's /64 network. One IPv6 end site
 * gets at least a /64 and can pick any address in it, so counting single IPv6 addresses would let one
 * client take a fresh quota per request. An IPv4-mapped IPv6 address (`::ffff:203.0.113.7`, how a
 * dual-stack socket reports IPv4 peers) counts as its IPv4 address; anything that is not an address
 * is returned as it is.
 */
import { isIPv4 } from 'node:net';
import ipaddr from 'ipaddr.js';

const IPV4_MAPPED = '::ffff:';

/** Leading 16-bit groups of an IPv6 address that make its /64 network. */
const NETWORK_GROUPS = 4;

export function addressGroup(address: string): string {
  if (!address.includes(':')) return address;
  // How a server listening on `::` sees every IPv4 client: answered without parsing, as it is per request.
  if (address.startsWith(IPV4_MAPPED) && isIPv4(address.slice(IPV4_MAPPED.length))) return address.slice(IPV4_MAPPED.length);
  let parsed: ipaddr.IPv6;
  try {
    parsed = ipaddr.IPv6.parse(address);
  } catch {
    return address;
  }
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString();
  return `${parsed.parts.slice(0, NETWORK_GROUPS).map((part) => part.toString(16)).join(':')}::/64`;
}
