import { BlockList, isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { addressBucket, canonicalAddress, UNPARSED_BUCKET } from './address-bucket.js';

describe('canonicalAddress', () => {
  it.each([
    ['5.5.5.5', '5.5.5.5'],
    ['::ffff:5.5.5.5', '5.5.5.5'],
    ['::FFFF:5.5.5.5', '5.5.5.5'],
    ['::ffff:505:505', '5.5.5.5'],
    ['0:0:0:0:0:ffff:5.5.5.5', '5.5.5.5'],
    ['0000:0000:0000:0000:0000:FFFF:0505:0505', '5.5.5.5'],
    // RFC 5952 §4: lower case, no leading zeros, the longest zero run shortened, the first of equal runs.
    ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['2001:db8::', '2001:db8::'],
    ['::', '::'],
    ['::1', '::1'],
    ['fe80::1%eth0', 'fe80::1'],
    // IPv4-compatible (deprecated), not mapped: an IPv6 address.
    ['::5.5.5.5', '::505:505'],
  ])('%s is %s', (text, canonical) => {
    expect(canonicalAddress(text)).toBe(canonical);
  });

  it.each(['', 'unknown', '1.2.3', '01.2.3.4', '1.2.3.4:80', '[::1]', '::1::2', '2001:db8::g'])('%j is no address', (text) => {
    expect(canonicalAddress(text)).toBeNull();
  });

  it('agrees with Node on random addresses: the canonical text is the same address, in the shortest spelling', () => {
    let seed = 7;
    const byte = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    for (let n = 0; n < 2000; n++) {
      const words = Array.from({ length: 8 }, () => ((byte() < 96 ? 0 : byte()) << 8) | (byte() < 128 ? 0 : byte()));
      const full = words.map((w) => w.toString(16).padStart(4, '0')).join(':');
      const c = canonicalAddress(full)!;
      expect(isIP(c), full).not.toBe(0);
      const list = new BlockList();
      list.addAddress(full, 'ipv6');
      expect(list.check(c, isIP(c) === 4 ? 'ipv4' : 'ipv6') || list.check(`::ffff:${c}`, 'ipv6'), `${full} -> ${c}`).toBe(true);
      expect(c.length).toBeLessThanOrEqual(full.length);
      expect(canonicalAddress(c)).toBe(c);
    }
  });
});

describe('addressBucket', () => {
  it('keeps IPv4, IPv4-mapped included, per address whatever the prefix', () => {
    for (const text of ['5.5.5.5', '::ffff:505:505', '::FFFF:5.5.5.5', '0:0:0:0:0:ffff:5.5.5.5']) {
      expect(addressBucket(text)).toBe('5.5.5.5');
      expect(addressBucket(text, 32)).toBe('5.5.5.5');
    }
  });

  it.each([
    ['2001:db8:1:2::1', 64, '2001:db8:1:2::/64'],
    ['2001:DB8:1:2:ffff:ffff:ffff:ffff', 64, '2001:db8:1:2::/64'],
    ['2001:db8:1:2:3:4:5:6', 128, '2001:db8:1:2:3:4:5:6/128'],
    ['2001:db8:1:2:3:4:5:6', 48, '2001:db8:1::/48'],
    ['2001:db8:1:2:3:4:5:6', 60, '2001:db8:1::/60'],
    ['2001:db8:1:1f:3:4:5:6', 60, '2001:db8:1:10::/60'],
    ['2001:db8:1:2:3:4:5:6', 33, '2001:db8::/33'],
    ['2001:db8:ffff::1', 33, '2001:db8:8000::/33'],
    ['2001:db8:ffff::1', 32, '2001:db8::/32'],
    ['fe80::1%eth0', 64, 'fe80::/64'],
  ])('%s with a /%i is %s', (text, prefix, bucket) => {
    expect(addressBucket(text, prefix)).toBe(bucket);
  });

  it('puts every address of a network in it, and none outside (checked with BlockList)', () => {
    let seed = 11;
    const word = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 65536;
    for (let n = 0; n < 1000; n++) {
      const prefix = 32 + (n % 97);
      const words = Array.from({ length: 8 }, word);
      const text = (ws: number[]): string => ws.map((w) => w.toString(16)).join(':');
      const addr = text(words);
      const bucket = addressBucket(addr, prefix);
      const [network, bits] = bucket.split('/') as [string, string];
      expect(Number(bits)).toBe(prefix);
      const list = new BlockList();
      list.addSubnet(network, prefix, 'ipv6');
      expect(list.check(addr, 'ipv6'), `${addr} in ${bucket}`).toBe(true);
      // Its neighbour across the prefix (the last bit of the network flipped) is not.
      const other = [...words];
      const bit = prefix - 1;
      other[bit >> 4] = other[bit >> 4]! ^ (0x8000 >> (bit & 15));
      expect(list.check(text(other), 'ipv6'), `${text(other)} not in ${bucket}`).toBe(false);
      expect(addressBucket(text(other), prefix)).not.toBe(bucket);
    }
  });

  it('counts what is not an address in one shared bucket', () => {
    expect(addressBucket('garbage')).toBe(UNPARSED_BUCKET);
    expect(addressBucket('')).toBe(UNPARSED_BUCKET);
  });
});
