/**
 * The client address every decision uses: the socket peer, or, only when the
 * peer is a trusted proxy, the right-most X-Forwarded-For entry that is not
 * itself trusted. Clients can prepend anything they like to X-Forwarded-For;
 * reading from the right means they cannot choose their own address.
 *
 * The address is given in its canonical text (src/http/address-bucket.ts): IPv4 clients of a
 * dual-stack socket (`::ffff:a.b.c.d`) and every other spelling of one address read the same, in
 * the access line and in the X-Forwarded-For the relay gets. Per-address budgets count it in its
 * bucket (addressBucket), not by this text.
 */
import { isIP, type BlockList } from 'node:net';
import { canonicalAddress } from './address-bucket.js';

function normalizeIp(addr: string | undefined): string {
  return (addr && canonicalAddress(addr)) || '0.0.0.0';
}

function isTrusted(list: BlockList, ip: string): boolean {
  const fam = isIP(ip);
  if (fam === 0) return false;
  return list.check(ip, fam === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Strips a port or brackets some proxies add (`1.2.3.4:5678`, `[::1]:80`); a zone (`fe80::1%eth0`)
 * is dropped with the rest of the canonical form. Anything that is then not an address gives ''.
 */
function cleanEntry(s: string): string {
  let v = s.trim();
  if (v.startsWith('[')) {
    const end = v.indexOf(']');
    v = end > 0 ? v.slice(1, end) : v;
  } else if (v.indexOf(':') !== -1 && v.indexOf(':') === v.lastIndexOf(':')) {
    v = v.slice(0, v.indexOf(':'));
  }
  return canonicalAddress(v) ?? '';
}

export function resolveClientIp(socketAddr: string | undefined, forwardedFor: string | string[] | undefined, trusted: BlockList | null): string {
  const peer = normalizeIp(socketAddr);
  if (!trusted || forwardedFor === undefined || !isTrusted(trusted, peer)) return peer;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let last = peer;
  for (let i = entries.length - 1; i >= 0; i--) {
    const ip = cleanEntry(entries[i]!);
    // A malformed entry cannot be trusted to name anyone: stop at the last good hop.
    if (isIP(ip) === 0) return last;
    if (!isTrusted(trusted, ip)) return ip;
    last = ip;
  }
  return last;
}
