/**
 * Address allowlists of keys (docs/api/keys.md): IPv4 and IPv6 addresses and CIDR
 * ranges. Parsed into node:net's BlockList, which matches both families; an IPv4 client
 * seen as an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, a dual-stack listener) is
 * matched as the IPv4 address it is.
 */
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** Entries per list, at most: a list is for a few servers and networks, not a firewall. */
export const MAX_ALLOW_ENTRIES = 50;

/** A range written with address bits past its prefix: the entry, and its two likely meanings. */
export interface PastPrefix {
  entry: string;
  range: string;
  address: string;
}

export type AllowParse = { ok: true; entries: string[] } | { ok: false; reason: string; pastPrefix?: PastPrefix };

/** One entry in its stored form (lower case, the prefix without leading zeros), or why it is refused. */
function entryOf(raw: string): { entry: string } | { reason: string; pastPrefix?: PastPrefix } {
  const shown = raw.slice(0, 60);
  const bad = { reason: `allow entries must be IPv4/IPv6 addresses or CIDR ranges (got "${shown}")` };
  const text = raw.trim().toLowerCase();
  const slash = text.indexOf('/');
  const address = slash === -1 ? text : text.slice(0, slash);
  const family = net.isIP(address);
  if (family === 0) return bad;
  if (slash === -1) return { entry: address };
  const prefix = text.slice(slash + 1);
  const max = family === 4 ? 32 : 128;
  if (!/^[0-9]{1,3}$/.test(prefix) || Number(prefix) > max) return bad;
  const entry = `${address}/${Number(prefix)}`;
  // A range names its first address: 10.0.0.1/8 is a slip for 10.0.0.1 or for 10.0.0.0/8, and
  // the wider reading would let 16 million addresses in.
  const first = (family === 4 ? ipaddr.IPv4 : ipaddr.IPv6).networkAddressFromCIDR(entry).toString();
  if (first !== ipaddr.parse(address).toString()) {
    const pastPrefix = { entry: shown, range: `${first}/${Number(prefix)}`, address };
    return { reason: `allow entry "${shown}" has address bits past its /${Number(prefix)}: write ${pastPrefix.range} for the range, or ${address} alone for the one address`, pastPrefix };
  }
  return { entry };
}

/**
 * A comma-separated list of addresses and CIDR ranges (`203.0.113.7, 10.0.0.0/8, 2001:db8::/32`),
 * or the reason it is refused (naming the first bad entry).
 */
export function parseAllowlist(text: string): AllowParse {
  const raw = text.split(',').map((e) => e.trim()).filter((e) => e.length > 0);
  if (raw.length === 0) return { ok: false, reason: 'allow must name at least one address or CIDR range' };
  if (raw.length > MAX_ALLOW_ENTRIES) return { ok: false, reason: `allow must have at most ${MAX_ALLOW_ENTRIES} entries` };
  const entries: string[] = [];
  for (const entry of raw) {
    const parsed = entryOf(entry);
    if ('reason' in parsed) return { ok: false, ...parsed };
    if (!entries.includes(parsed.entry)) entries.push(parsed.entry);
  }
  return { ok: true, entries };
}

/** The BlockList of entries already checked by parseAllowlist. */
export function blockListOf(entries: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const entry of entries) {
    const slash = entry.indexOf('/');
    const address = slash === -1 ? entry : entry.slice(0, slash);
    const type = net.isIPv4(address) ? 'ipv4' : 'ipv6';
    if (slash === -1) list.addAddress(address, type);
    else list.addSubnet(address, Number(entry.slice(slash + 1)), type);
  }
  return list;
}

const MAPPED_V4 = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;
const V4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/;
const V6_IN_BRACKETS = /^\[([0-9a-f:.]+)\](?::(\d{1,5}))?$/i;

/**
 * A client's address as a trusted proxy may write it in X-Forwarded-For, with its port
 * (`203.0.113.7:1234`, `[2001:db8::1]:443`: some load balancers do), without the port;
 * an address without one, or any other text (a port past 65535 too), as it is.
 */
export function withoutPort(address: string): string {
  // A plain IPv4 address has no colon, a plain IPv6 one no bracket (a mapped IPv4 one is left as it is below).
  if (!address.includes('[') && !(address.includes(':') && address.includes('.'))) return address;
  const found = V4_WITH_PORT.exec(address) ?? V6_IN_BRACKETS.exec(address);
  const port = found?.[2] === undefined ? 0 : Number(found[2]);
  return found !== null && port <= 65_535 && net.isIP(found[1]!) !== 0 ? found[1]! : address;
}

/** Whether `address` (a peer's address as Node reports it, or a trusted proxy's report of the client: withoutPort) is in the list. */
export function addressAllowed(list: net.BlockList, reported: string | undefined): boolean {
  if (reported === undefined || reported === '') return false;
  const address = withoutPort(reported);
  const mapped = MAPPED_V4.exec(address);
  if (mapped) return list.check(mapped[1]!, 'ipv4') || list.check(address, 'ipv6');
  const family = net.isIP(address);
  if (family === 0) return false;
  return list.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * SCHOOL_DATA_TRUSTED_PROXIES (entries checked by parseAllowlist, comma-separated) as the
 * trust function of Fastify's `trustProxy`: a hop is trusted when its address, a port it is
 * written with left aside, is in the list.
 */
export function trustedHops(entries: string): (address: string) => boolean {
  const list = blockListOf(entries.split(','));
  return (address) => addressAllowed(list, address);
}

/**
 * A client address as a throttle counts it: an IPv6 address by its /64, which one machine (or
 * one customer's line) is usually given whole, so it cannot spread its attempts over the
 * addresses in it; an IPv4 one, or one mapped into IPv6, as itself. Anything else as it is.
 */
export function throttledAddress(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  return `${v6.parts.slice(0, 4).map((part) => part.toString(16)).join(':')}::/64`;
}
