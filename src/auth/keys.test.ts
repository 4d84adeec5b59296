import { describe, expect, it } from 'vitest';
import { hashKey, validImportedKey } from './keys.js';

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

  it('refuses short, long and non-visible keys', () => {
    expect(validImportedKey('sk-short')).toMatch(/at least 16/);
    expect(validImportedKey('x'.repeat(257))).toMatch(/at most 256/);
    expect(validImportedKey('abcdefghijklmnop 0123')).toMatch(/visible ASCII/);
  });
});
