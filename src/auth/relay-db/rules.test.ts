import { describe, expect, it } from 'vitest';
import { couldBeRelayKey, judgeToken, storedKey, type TokenRow } from './rules.js';

const NOW = 1_800_000_000;
const row = (over: Partial<TokenRow> = {}): TokenRow => ({
  id: '7',
  key: 'abc',
  status: 1,
  deleted: false,
  expiredTime: -1,
  remainQuota: 100,
  unlimitedQuota: false,
  userId: '42',
  userStatus: 1,
  userDeleted: false,
  ...over,
});

describe("judgeToken: the relay's own checks, in its order", () => {
  it('admits an enabled token of an enabled user with quota and no expiry', () => {
    expect(judgeToken(row(), NOW)).toEqual({ ok: true });
  });

  it.each([
    ['deleted in the console, whatever else it is', { deleted: true, status: 2 }, 'key_deleted'],
    ['disabled (2)', { status: 2 }, 'key_disabled'],
    ['expired status (3), even with a future expiry', { status: 3, expiredTime: NOW + 100 }, 'key_disabled'],
    ['exhausted status (4), even with quota', { status: 4 }, 'key_disabled'],
    ['expiry in the past', { expiredTime: NOW - 1 }, 'key_expired'],
    ['expiry 0 (the epoch)', { expiredTime: 0 }, 'key_expired'],
    ['no quota left', { remainQuota: 0 }, 'key_exhausted'],
    ['negative quota', { remainQuota: -5 }, 'key_exhausted'],
    ['a user that is gone', { userStatus: null }, 'user_missing'],
    ['a soft-deleted user', { userDeleted: true }, 'user_deleted'],
    ['a disabled user', { userStatus: 2 }, 'user_disabled'],
    ["one-api's deleted user (status 3)", { userStatus: 3 }, 'user_disabled'],
  ] as const)('refuses a token that is %s', (_what, over, reason) => {
    expect(judgeToken(row(over), NOW)).toEqual({ ok: false, reason });
  });

  it('treats an expiry of exactly now as not yet expired, as the relay does (it refuses only expired_time < now)', () => {
    expect(judgeToken(row({ expiredTime: NOW }), NOW)).toEqual({ ok: true });
  });

  it('admits an unlimited token with no quota left', () => {
    expect(judgeToken(row({ unlimitedQuota: true, remainQuota: 0 }), NOW)).toEqual({ ok: true });
  });
});

describe('couldBeRelayKey', () => {
  it("accepts 1 to 128 of the console's characters, [0-9A-Za-z]", () => {
    expect(couldBeRelayKey('a')).toBe(true);
    expect(couldBeRelayKey('x'.repeat(128))).toBe(true);
    expect(couldBeRelayKey('AZaz09' + 'Qq'.repeat(21))).toBe(true);
  });

  it('turns away anything else before any query: quotes, comments, NUL, white space, non-ASCII, over 128', () => {
    for (const body of ['', 'x'.repeat(129), 'x'.repeat(10_000), 'a\0b', 'a b', 'ключ', 'a\tb', 'a\u007fb', "x')OR/**/1=1#", 'a\\b', 'a%', 'a_b', `a'b"c\`;`]) {
      expect(couldBeRelayKey(body), JSON.stringify(body)).toBe(false);
    }
  });
});

describe('storedKey', () => {
  it('drops the spaces PostgreSQL pads a char(48) key with, nothing else', () => {
    expect(storedKey('abc   ')).toBe('abc');
    expect(storedKey(' abc')).toBe(' abc');
    expect(storedKey(Buffer.from('abc'))).toBe('abc');
  });
});
