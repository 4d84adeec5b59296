import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const ID_CHARS = 13;
const POOL_BYTES = 4096;

/**
 * Random letters and digits made 4 KB at a time: a call into the random source per request cost
 * more than the rest of the id under load (docs/performance.md), so an id's random part is a
 * slice of this string.
 */
let pool = '';
let at = 0;

function randomChars(n: number): string {
  if (at + n > pool.length) {
    const bytes = randomBytes(POOL_BYTES);
    for (let i = 0; i < bytes.length; i++) bytes[i] = ALPHABET.charCodeAt(bytes[i]! % ALPHABET.length);
    pool = bytes.toString('latin1');
    at = 0;
  }
  return pool.slice(at, (at += n));
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/**
 * A fresh id per request, in the relay's own form (UTC timestamp to the millisecond, then random
 * letters and digits) so ids from sluice and from the relay look alike in support tickets.
 */
export function newRequestId(nowMs: number): string {
  const d = new Date(nowMs);
  const stamp =
    `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}` +
    `${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}${pad(d.getUTCMilliseconds(), 3)}`;
  return stamp + randomChars(ID_CHARS);
}
