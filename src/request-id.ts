import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
let pool = randomBytes(4096);
let at = 0;

function randomChars(n: number): string {
  if (at + n > pool.length) {
    pool = randomBytes(4096);
    at = 0;
  }
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHABET[pool[at++]! % 62];
  return s;
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
  return stamp + randomChars(13);
}
