import { describe, expect, it } from 'vitest';
import { generateKey, hashKey, lookupKey, validImportedKey } from './keys.js';

describe('validImportedKey', () => {
  it('accepts a key with or without its one optional sk-', () => {
    expect(validImportedKey('sk-abcdefghijklmnop0123')).toBeNull();
    expect(validImportedKey('abcdefghijklmnop0123')).toBeNull();
    expect(hashKey('sk-abcdefghijklmnop0123')).toBe(hashKey('abcdefghijklmnop0123'));
  });

  it('refuses a key that still starts with sk- once one sk- is stripped, which would only work with both prefixes', () => {
    expect(validImportedKey('sk-sk-abcdefghijklmnop0123')).toMatch(/must not start with "sk-sk-"/);
    // Without its first sk- the wire form would be sk-abcdef..., and "sk-abcdef..." hashes differently from "sk-sk-...".
    expect(hashKey('sk-sk-abcdefghijklmnop0123')).not.toBe(hashKey('abcdefghijklmnop0123'));
  });

  it('refuses a key holding "-", which the relay and sluice would cut there (sk-<key>-<n> asks for channel n)', () => {
    expect(validImportedKey('sk-proj-abcdefghijklmnop0123')).toMatch(/must not contain "-"/);
    expect(validImportedKey('abcdefghijklmnop-0123')).toMatch(/must not contain "-"/);
  });

  it('refuses short, long and non-visible keys', () => {
    expect(validImportedKey('sk-short')).toMatch(/at least 16/);
    expect(validImportedKey('x'.repeat(257))).toMatch(/at most 256/);
    expect(validImportedKey('abcdefghijklmnop 0123')).toMatch(/visible ASCII/);
  });
});

describe('lookupKey and hashKey: a key is looked up as the relay looks it up', () => {
  it.each([
    ['sk-abc', 'abc'],
    ['abc', 'abc'],
    ['sk-abc-3', 'abc'],
    ['abc-3-x', 'abc'],
    ['sk-sk-abc', 'sk'],
    ['sk--3', ''],
    ['-', ''],
    ['SK-abc', 'SK'],
  ])('%s → %s', (presented, looked) => {
    expect(lookupKey(presented)).toBe(looked);
    expect(hashKey(presented)).toBe(hashKey(looked));
  });

  it('gives every suffix variant of a key the one hash, and different keys different hashes', () => {
    const body = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL';
    expect(hashKey(`sk-${body}-1`)).toBe(hashKey(body));
    expect(hashKey(`sk-${body}-${'x'.repeat(40)}`)).toBe(hashKey(`sk-${body}`));
    expect(hashKey(`sk-${body}x`)).not.toBe(hashKey(body));
  });
});

describe('generateKey', () => {
  it('makes sk- and 48 characters of the console alphabet, never a "-" the relay would cut at, never twice the same', () => {
    const seen = new Set<string>();
    const counts = new Map<string, number>();
    for (let i = 0; i < 2000; i++) {
      const k = generateKey();
      expect(k).toMatch(/^sk-[0-9A-Za-z]{48}$/);
      seen.add(k);
      for (const c of k.slice(3)) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    expect(seen.size).toBe(2000);
    // Every one of the 62 characters is used, none far more than its share (96,000 / 62 ≈ 1548).
    expect(counts.size).toBe(62);
    for (const n of counts.values()) expect(n).toBeLessThan(1900);
  });
});
