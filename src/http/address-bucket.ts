/**
 * What a client address is for every per-address decision: its canonical form, and the bucket a
 * per-address budget counts it in. Text is no identity: `::FFFF:5.5.5.5`, `::ffff:505:505` and
 * `0:0:0:0:0:ffff:5.5.5.5` are all 5.5.5.5, and one IPv6 customer holds a whole /64 (every
 * address in it for the asking), so counting per IPv6 address text gives a client as many budgets
 * as it cares to use. Rate limiters bucket IPv6 by prefix for this reason (nginx, Cloudflare and
 * envoy's descriptors use /64 by default, or make it a setting).
 */
import { isIP } from 'node:net';
import { DEFAULTS } from '../config/index.js';

/** The bucket of anything that is not an address (it cannot happen for a socket's peer): one, shared. */
export const UNPARSED_BUCKET = 'unparsed';

/** An address as 4 (IPv4) or 16 (IPv6) bytes, or null when `text` is not one. A zone (`%eth0`) is dropped. */
function addressBytes(text: string): Uint8Array | null {
  const zone = text.indexOf('%');
  const addr = zone === -1 ? text : text.slice(0, zone);
  const family = isIP(addr);
  if (family === 4) return Uint8Array.from(addr.split('.'), Number);
  if (family !== 6) return null;
  // isIP has vouched for the syntax: at most one `::`, groups of 1-4 hex digits, an optional
  // dotted IPv4 tail in place of the last two groups.
  const groups = (part: string): number[] => {
    if (part === '') return [];
    const out: number[] = [];
    for (const g of part.split(':')) {
      if (g.includes('.')) {
        const [a, b, c, d] = g.split('.').map(Number) as [number, number, number, number];
        out.push((a << 8) | b, (c << 8) | d);
      } else out.push(parseInt(g, 16));
    }
    return out;
  };
  const gap = addr.indexOf('::');
  const head = groups(gap === -1 ? addr : addr.slice(0, gap));
  const tail = gap === -1 ? [] : groups(addr.slice(gap + 2));
  const words = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  return bytes;
}

/** `::ffff:0:0/96`, the IPv4-mapped addresses of a dual-stack socket (RFC 4291 §2.5.5.2). */
function isMapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** RFC 5952 text of 16 bytes: lower case, no leading zeros, the longest run (2+) of zero groups as `::`. */
function ipv6Text(b: Uint8Array): string {
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((b[i]! << 8) | b[i + 1]!);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (ws: number[]): string => ws.map((w) => w.toString(16)).join(':');
  return best === -1 ? hex(words) : `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

/** The bytes as an address's canonical text: dotted IPv4 for IPv4 and IPv4-mapped IPv6, else RFC 5952. */
function canonicalText(b: Uint8Array): string {
  if (b.length === 4) return b.join('.');
  return isMapped(b) ? b.subarray(12).join('.') : ipv6Text(b);
}

/**
 * The canonical text of an address (`::FFFF:5.5.5.5` and `::ffff:505:505` are `5.5.5.5`,
 * `2001:DB8:0::1%eth0` is `2001:db8::1`), or null when `text` is not an address.
 */
export function canonicalAddress(text: string): string | null {
  // The common case, a plain IPv4 address, is already canonical (isIP refuses leading zeros).
  if (isIP(text) === 4) return text;
  const b = addressBytes(text);
  return b === null ? null : canonicalText(b);
}

/**
 * The bucket a per-address budget counts `address` in: an IPv4 address (IPv4-mapped ones
 * included) is its own bucket, `5.5.5.5`; an IPv6 address counts in its network of
 * `ipv6Prefix` bits, written as that network, `2001:db8:1:2::/64`. Anything that is not an address
 * counts in one shared bucket (`unparsed`). Used for the per-IP limits (src/limits/ip.ts) and by
 * any other per-address budget, so that an address is one subject everywhere.
 */
export function addressBucket(address: string, ipv6Prefix: number = DEFAULTS.ipv6Prefix): string {
  if (isIP(address) === 4) return address;
  const b = addressBytes(address);
  if (b === null) return UNPARSED_BUCKET;
  if (b.length === 4 || isMapped(b)) return canonicalText(b);
  const prefix = Math.max(0, Math.min(128, Math.trunc(ipv6Prefix)));
  for (let i = 0; i < 16; i++) {
    const kept = Math.max(0, Math.min(8, prefix - 8 * i));
    b[i] = b[i]! & (0xff00 >> kept);
  }
  return `${ipv6Text(b)}/${prefix}`;
}
