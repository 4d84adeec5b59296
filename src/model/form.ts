/**
 * Form fields as the relay (new-api, Go) reads them, and what its request structs make of them.
 *
 * new-api reads a non-JSON body (common/gin.go) into `map[key] = value`, or `[values...]` when a
 * key repeats, marshals that map to JSON (keys sorted, strings coerced to valid UTF-8) and decodes
 * the JSON into its request struct with encoding/json: field names match without regard to ASCII
 * case, and a repeated key (an array where a string belongs) fails the decode, so the relay
 * answers 400. The middlewares that want a map instead (the Kling and Jimeng adapters) look a key
 * up exactly.
 */
import { decodeGoString } from './scan.js';

/** One field: its name and value as Go strings (latin1 here: one char per byte). */
export type Field = readonly [name: string, value: string];

export type Fields = { ok: true; fields: Field[] } | { ok: false; reason: string };

/** The value of a hex digit's char code; -1 for any other, or for none (past the end of the input). */
export function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/** Go's url.QueryUnescape: `+` is a space, `%XX` a byte, any other `%` an error (null). */
export function queryUnescape(s: string): string | null {
  if (!s.includes('%') && !s.includes('+')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x2b /* + */) {
      out += ' ';
    } else if (c === 0x25 /* % */) {
      const hi = i + 2 < s.length ? hexValue(s.charCodeAt(i + 1)) : -1;
      const lo = hi < 0 ? -1 : hexValue(s.charCodeAt(i + 2));
      if (lo < 0) return null;
      out += String.fromCharCode((hi << 4) | lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

/**
 * Go's url.ParseQuery over a latin1 string: `&`-separated pairs; a pair holding `;` anywhere is an
 * error (Go 1.17 and later), as is a bad percent escape. Go keeps parsing after an error but
 * returns it, and new-api then answers 400: so any error fails the whole form here. Empty pairs
 * are skipped; a pair without `=` is a key with an empty value.
 */
export function parseQuery(s: string): Fields {
  const fields: Field[] = [];
  let error: string | null = null;
  let at = 0;
  while (at < s.length) {
    let amp = s.indexOf('&', at);
    if (amp === -1) amp = s.length;
    const pair = s.slice(at, amp);
    at = amp + 1;
    if (pair.includes(';')) {
      error ??= 'invalid semicolon separator in form body';
      continue;
    }
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const key = queryUnescape(eq === -1 ? pair : pair.slice(0, eq));
    const value = key === null ? null : queryUnescape(eq === -1 ? '' : pair.slice(eq + 1));
    if (key === null || value === null) {
      error ??= 'invalid percent escape in form body';
      continue;
    }
    fields.push([key, value]);
  }
  return error === null ? { ok: true, fields } : { ok: false, reason: error };
}

/**
 * The first value of `name` in a URL query as gin's `c.Query` reads it: Go's URL.Query() ignores
 * the pairs it cannot parse (a pair with `;`, a bad escape) and keeps the others; the name is
 * matched exactly. Null when absent.
 */
export function firstQueryValue(query: string, name: string): string | null {
  if (!query.includes(name) && !query.includes('%')) return null; // the name is spelt out, or escaped
  let at = 0;
  while (at < query.length) {
    let amp = query.indexOf('&', at);
    if (amp === -1) amp = query.length;
    const pair = query.slice(at, amp);
    at = amp + 1;
    if (pair === '' || pair.includes(';')) continue;
    const eq = pair.indexOf('=');
    const key = queryUnescape(eq === -1 ? pair : pair.slice(0, eq));
    if (key !== name) continue;
    const value = queryUnescape(eq === -1 ? '' : pair.slice(eq + 1));
    if (value !== null) return Buffer.from(value, 'latin1').toString('utf8');
  }
  return null;
}

export type StructField = { ok: true; value: string | null } | { ok: false; reason: string };

// biome-ignore lint/suspicious/noControlCharactersInRegex: every ASCII character, the controls among them
const ASCII_ONLY = /^[\x00-\x7f]*$/;

/**
 * Go's encoding/json field matching: an exact match, or one ignoring case, where Go folds ASCII
 * letters and, beyond ASCII, the Kelvin sign onto k, the long s onto s and both Turkish i's onto
 * i (ToUpper(ToLower(r)); no other character folds onto an ASCII letter).
 */
export function matchesFolded(key: string, name: string): boolean {
  if (key === name) return true;
  if (key.length !== name.length) return false;
  let k = key;
  if (!ASCII_ONLY.test(k)) {
    k = k
      .replace(/\u212a/g, 'k')
      .replace(/\u017f/g, 's')
      .replace(/[\u0130\u0131]/g, 'i');
    if (!ASCII_ONLY.test(k)) return false;
  }
  return k.toLowerCase() === name.toLowerCase();
}

/** A field name as Go's JSON encoder writes it (valid UTF-8), for matching. */
const goName = (latin1: string): string => (ASCII_ONLY.test(latin1) ? latin1 : decodeGoString(Buffer.from(latin1, 'latin1')));

/**
 * The string field `name` of the struct the relay decodes these fields into. Fields whose name
 * matches `name` ignoring case all assign it (in sorted key order, the last wins); sluice refuses
 * more than one of them instead, and a repeated one, which the relay refuses too.
 */
export function structField(fields: readonly Field[], name: string): StructField {
  let found: Field | undefined;
  for (const f of fields) {
    if (!matchesFolded(goName(f[0]), name)) continue;
    if (found !== undefined) {
      return {
        ok: false,
        reason: found[0] === f[0] ? `form field "${f[0]}" is repeated (the relay refuses it too)` : `form fields "${found[0]}" and "${f[0]}" both name the ${name} field`,
      };
    }
    found = f;
  }
  return { ok: true, value: found === undefined ? null : decodeGoString(Buffer.from(found[1], 'latin1')) };
}

/**
 * `m[name].(string)` on the map the relay builds: the exact key; a repeated key is an array there,
 * which is no string (""), as is an absent one.
 */
export function mapField(fields: readonly Field[], name: string): string {
  let value: string | null = null;
  let count = 0;
  for (const f of fields) {
    if (f[0] === name) {
      value = f[1];
      count++;
    }
  }
  return count === 1 && value !== null ? decodeGoString(Buffer.from(value, 'latin1')) : '';
}
