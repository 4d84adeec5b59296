/**
 * What makes a key from the relay's database valid, decided exactly as the relay decides it
 * (new-api `middleware/auth.go` TokenAuth and `model/token.go` ValidateUserToken), in one pure
 * function shared by every database dialect.
 */
import type { KeyStateReason } from '../reasons.js';

/** A token row joined with its user, normalised across PostgreSQL, MySQL and SQLite. */
export interface TokenRow {
  /** Ids as text: a relay's 64-bit ids may pass 2^53. */
  id: string;
  /** The key as stored: without `sk-`. */
  key: string;
  status: number;
  /** new-api: `deleted_at` set (deleted in the console; the row and its key stay). one-api deletes the row. */
  deleted: boolean;
  /** Unix seconds; -1: never. */
  expiredTime: number;
  remainQuota: number;
  unlimitedQuota: boolean;
  userId: string;
  /** Null when no user row joined (a hard-deleted user whose tokens remain). */
  userStatus: number | null;
  /** new-api: `users.deleted_at` set. one-api has no soft delete (its status 3 means deleted). */
  userDeleted: boolean;
}

export type TokenVerdict = { ok: true } | { ok: false; reason: KeyStateReason };

const TOKEN_ENABLED = 1;
const USER_ENABLED = 1;

/**
 * The relay's checks, in its order: not deleted (the relay adds `deleted_at IS NULL` to every
 * query, so a deleted key is one it does not find); status enabled; not expired (`expired_time` -1, or not
 * before now: the relay refuses only `expired_time < now`); quota left unless unlimited; then the
 * user exists, is not deleted, and is enabled. The relay answers a disabled user 403 and a deleted
 * one 500; the contract calls every one of these an authentication failure.
 */
export function judgeToken(row: TokenRow, nowSeconds: number): TokenVerdict {
  if (row.deleted) return { ok: false, reason: 'key_deleted' };
  if (row.status !== TOKEN_ENABLED) return { ok: false, reason: 'key_disabled' };
  if (row.expiredTime !== -1 && row.expiredTime < nowSeconds) return { ok: false, reason: 'key_expired' };
  if (!row.unlimitedQuota && row.remainQuota <= 0) return { ok: false, reason: 'key_exhausted' };
  if (row.userStatus === null) return { ok: false, reason: 'user_missing' };
  if (row.userDeleted) return { ok: false, reason: 'user_deleted' };
  if (row.userStatus !== USER_ENABLED) return { ok: false, reason: 'user_disabled' };
  return { ok: true };
}

/** The relay's column holds at most 128 characters. */
const MAX_RELAY_KEY_LENGTH = 128;

/**
 * Whether a body could be a key of the relay's console: 1 to 128 of `[0-9A-Za-z]` (new-api and
 * one-api generate 48 of them; a `-` is already cut away). Anything else is answered "not a relay
 * key" without a query. This is also what keeps hostile bytes away from every database: a NUL
 * fails a whole PostgreSQL statement (and the batch other keys share), and a quote must never
 * depend on a driver's escaping being read as the server reads it (MySQL's NO_BACKSLASH_ESCAPES).
 */
export function couldBeRelayKey(body: string): boolean {
  if (body.length === 0 || body.length > MAX_RELAY_KEY_LENGTH) return false;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    const alnum = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
    if (!alnum) return false;
  }
  return true;
}

/** A driver's value as a boolean: PostgreSQL gives booleans, MySQL and SQLite 0/1. */
export function truthy(v: unknown): boolean {
  return v === true || v === 1 || v === '1' || v === 't' || v === 'true' || v === 1n;
}

/**
 * A driver's integer as the relay reads it into a Go int: NULL is 0 (GORM leaves the field at its
 * zero value, so a NULL expiry or quota refuses the key); node-postgres gives int8 as a string,
 * mysql2 too for large values.
 */
export function integer(v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string' && v.trim() !== '') return Number(v);
  return Number.NaN;
}

/** A row's id as text, exact past 2^53 (where the drivers give a string); NULL is 0, as in Go. */
export function idText(v: unknown): string {
  if (v === null || v === undefined) return '0';
  if (typeof v === 'string') return v.trim();
  return String(v);
}

/** The stored key as compared: PostgreSQL pads a `char(48)` column (installs before 2026-04) with spaces. */
export function storedKey(v: unknown): string {
  const s = typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
  return s.replace(/ +$/, '');
}
