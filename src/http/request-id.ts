import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const POOL_BYTES = 4096;
const ID_CHARS = 13;

/**
 * Random characters of the alphabet, made a few thousand at a time, so that an id's random part
 * is a slice of this string instead of thirteen concatenations on every request.
 */
let pool = '';
let at = 0;

function refill(): void {
  const bytes = randomBytes(POOL_BYTES);
  for (let i = 0; i < bytes.length; i++) bytes[i] = ALPHABET.charCodeAt(bytes[i]! % 62);
  pool = bytes.toString('latin1');
  at = 0;
}

function randomChars(n: number): string {
  if (at + n > pool.length) refill();
  return pool.slice(at, (at += n));
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/**
 * A fresh id per request, in the relay's own form (UTC timestamp, then random
 * characters) so ids from sluice and from the relay look alike in support
 * tickets.
 */
let stampMs = -1;
let stamp = '';

export function newRequestId(nowMs: number): string {
  // Many requests share a millisecond under load: format the timestamp once per millisecond.
  if (nowMs !== stampMs) {
    const d = new Date(nowMs);
    stampMs = nowMs;
    stamp =
      `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}` +
      `${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}${pad(d.getUTCMilliseconds(), 3)}`;
  }
  return stamp + randomChars(ID_CHARS);
}
