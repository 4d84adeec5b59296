/**
 * Key material. A key on the wire is `sk-<body>`; the `sk-` is optional and
 * ignored when validating, and so is a `-<suffix>` after the body (the relay reads
 * `sk-<key>-<n>` as key `<key>` asking for channel `n`). Only SHA-256 of the part
 * looked up is ever stored: keys are long random strings, so a fast hash is not
 * brute-forceable, and lookup by hash keeps the hot path to one map or Redis read.
 */
import { hash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';

const KEY_PREFIX = 'sk-';

/** The body of a key as it arrives: one leading `sk-` stripped, nothing else changed. */
export function keyBody(raw: string): string {
  return raw.startsWith(KEY_PREFIX) ? raw.slice(KEY_PREFIX.length) : raw;
}

/**
 * The part of a presented key that is looked up, as the relay's TokenAuth looks it up (new-api
 * `middleware/auth.go`: `TrimPrefix(key, "sk-")`, then the part before the first `-`): one
 * leading `sk-` stripped, then everything from the first `-` on cut away. `sk-<key>-<n>` is key
 * `<key>` (the relay gives an administrator channel `n`, and refuses anyone else with 403), so
 * sluice caches and looks up `<key>` however many suffixes are tried. The presented key has
 * already lost its `Bearer ` and surrounding white space; what is forwarded stays as sent.
 */
export function lookupKey(presented: string): string {
  const body = keyBody(presented);
  const dash = body.indexOf('-');
  return dash === -1 ? body : body.slice(0, dash);
}

/** The hash a key is cached, looked up and stored by: SHA-256 of its lookupKey. */
export function hashKey(raw: string): string {
  // The one-shot form: it skips the Hash object createHash().update().digest() builds, and this runs per request.
  return hash('sha256', lookupKey(raw), 'hex');
}

/** Constant-time equality of two hex digests. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * A new key in wire form: `sk-` and 48 characters of [0-9A-Za-z] (285 bits), the relay console's
 * own alphabet. No `-`: the relay reads `sk-<key>-<n>` as a request for channel `n` and looks up
 * only the part before it, so a key holding `-` would reach the relay as a different key.
 */
export function generateKey(): string {
  // Rejection sampling: bytes from 248 on are dropped, so each character is uniform.
  let out = KEY_PREFIX;
  while (out.length < KEY_PREFIX.length + 48) {
    for (const b of randomBytes(64)) {
      if (b < 248 && out.length < KEY_PREFIX.length + 48) out += KEY_ALPHABET[b % 62];
    }
  }
  return out;
}

export function newKeyId(): string {
  return 'key_' + randomUUID().replace(/-/g, '').slice(0, 20);
}

/**
 * Imported keys must look like keys: visible ASCII, no spaces, no `-` (lookupKey would cut it
 * there, as the relay does), a sane length. A body that still
 * starts with `sk-` once its optional `sk-` is stripped (`sk-sk-...`) is refused: the relay and
 * sluice strip only one, so such a key would work only when sent with both prefixes, breaking
 * "the leading sk- is optional" for whoever was handed it.
 */
export function validImportedKey(raw: string): string | null {
  const body = keyBody(raw);
  if (body.startsWith(KEY_PREFIX)) {
    return 'an imported key must not start with "sk-sk-": only one leading "sk-" is optional, so that key would work only when sent with both; import it without the extra "sk-"';
  }
  if (body.includes('-')) {
    return 'an imported key must not contain "-": the relay reads "sk-<key>-<n>" as key <key> asking for channel <n>, and sluice looks keys up as the relay does';
  }
  if (body.length < 16) return 'an imported key must be at least 16 characters long (after its optional "sk-")';
  if (body.length > 256) return 'an imported key must be at most 256 characters long';
  if (!/^[\x21-\x7e]+$/.test(body)) return 'an imported key may hold only visible ASCII characters';
  return null;
}
