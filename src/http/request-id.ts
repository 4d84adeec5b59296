import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const ID_CHARS = 13;

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
  let random = '';
  for (const b of randomBytes(ID_CHARS)) random += ALPHABET[b % ALPHABET.length];
  return stamp + random;
}
