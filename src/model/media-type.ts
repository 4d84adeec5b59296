/**
 * Media-type and Content-Disposition values read as Go's `mime.ParseMediaType` reads them: the
 * relay takes a multipart boundary from Content-Type this way, and each multipart part's field name
 * from its Content-Disposition. A name sluice read differently from the relay would let a model
 * field pass unseen, so the rules below follow Go's, quirks included:
 * - the type is lower-cased and must be `token` or `token/token`;
 * - parameter names are lower-cased; values are tokens or quoted strings, where a backslash escapes
 *   only a "tspecial" character (`\"`, `\\`) and stays a literal backslash before anything else
 *   (MSIE sends `C:\dir\file`); CR or LF ends a quoted string in failure;
 * - a repeated parameter with a different value fails the whole value; with the same value it is
 *   accepted;
 * - RFC 2231 forms (`name*=utf-8''...`, `name*0=...`, `name*1*=...`) are stitched together and
 *   override a plain parameter of the same name;
 * - a trailing `;` is allowed.
 *
 * Header bytes are taken as latin1 strings (one char per byte), as the multipart reader hands them
 * over; Go trims Unicode white space around parameters, which in UTF-8 includes U+0085 and U+00A0
 * (two bytes each): those are trimmed too.
 */

export interface MediaType {
  /** Lower-cased `type/subtype` (or a lone token, as Content-Disposition's `form-data`). */
  type: string;
  params: Map<string, string>;
}

const TSPECIALS = '()<>@,;:\\"/[]?=';

function isTokenChar(c: number): boolean {
  return c > 0x20 && c < 0x7f && !TSPECIALS.includes(String.fromCharCode(c));
}

/** Length of the token at `from`. */
function tokenLength(s: string, from: number): number {
  let i = from;
  while (i < s.length && isTokenChar(s.charCodeAt(i))) i++;
  return i - from;
}

/**
 * Length of the Unicode white space (as Go's unicode.IsSpace sees UTF-8 bytes) at `i` of a latin1
 * string, or 0.
 */
function spaceAt(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) return 1;
  if (c === 0xc2) {
    const d = s.charCodeAt(i + 1);
    return d === 0x85 || d === 0xa0 ? 2 : 0;
  }
  if (c === 0xe1 && s.charCodeAt(i + 1) === 0x9a && s.charCodeAt(i + 2) === 0x80) return 3; // U+1680
  if (c === 0xe2) {
    const d = s.charCodeAt(i + 1);
    const e = s.charCodeAt(i + 2);
    if (d === 0x80 && ((e >= 0x80 && e <= 0x8a) || e === 0xa8 || e === 0xa9 || e === 0xaf)) return 3; // U+2000..200A, 2028, 2029, 202F
    if (d === 0x81 && e === 0x9f) return 3; // U+205F
  }
  if (c === 0xe3 && s.charCodeAt(i + 1) === 0x80 && s.charCodeAt(i + 2) === 0x80) return 3; // U+3000
  return 0;
}

function skipSpace(s: string, i: number): number {
  for (;;) {
    const n = spaceAt(s, i);
    if (n === 0) return i;
    i += n;
  }
}

function trimSpace(s: string): string {
  const start = skipSpace(s, 0);
  let end = s.length;
  // Trailing white space: ASCII and the two-byte forms are enough to judge a media type, which
  // must be ASCII tokens anyway.
  while (end > start) {
    const c = s.charCodeAt(end - 1);
    if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) end--;
    else if ((c === 0x85 || c === 0xa0) && s.charCodeAt(end - 2) === 0xc2) end -= 2;
    else break;
  }
  return s.slice(start, end);
}

/** The type is `token` or `token/token`, nothing else. */
function validType(t: string): boolean {
  const first = tokenLength(t, 0);
  if (first === 0) return false;
  if (first === t.length) return true;
  if (t.charCodeAt(first) !== 0x2f /* / */) return false;
  const second = tokenLength(t, first + 1);
  return second > 0 && first + 1 + second === t.length;
}

/** A quoted string's value and where it ends, or null (unterminated, or CR/LF inside). */
function quoted(s: string, from: number): { value: string; end: number } | null {
  let out = '';
  for (let i = from + 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { value: out, end: i + 1 };
    if (c === '\\' && i + 1 < s.length && TSPECIALS.includes(s[i + 1]!)) {
      out += s[i + 1];
      i++;
      continue;
    }
    if (c === '\r' || c === '\n') return null;
    out += c;
  }
  return null;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66);
}

/** Go's percentHexUnescape: every `%` must start `%XX`. Bytes are kept as latin1 chars. */
function percentUnescape(s: string): string | null {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.length || !isHex(s.charCodeAt(i + 1)) || !isHex(s.charCodeAt(i + 2))) return null;
    out += String.fromCharCode(parseInt(s.slice(i + 1, i + 3), 16));
    i += 2;
  }
  return out;
}

/** RFC 2231 `charset'language'value`; only us-ascii and utf-8 are decoded, as Go does. */
function decode2231(v: string): string | null {
  const a = v.indexOf("'");
  if (a === -1) return null;
  const b = v.indexOf("'", a + 1);
  if (b === -1) return null;
  const charset = v.slice(0, a).toLowerCase();
  if (charset !== 'us-ascii' && charset !== 'utf-8') return null;
  return percentUnescape(v.slice(b + 1));
}

/**
 * Parses a media type or disposition value as Go does; null where Go returns an error (the multipart
 * reader then treats the part as having no name at all).
 */
export function parseMediaType(value: string): MediaType | null {
  const semi = value.indexOf(';');
  const base = semi === -1 ? value : value.slice(0, semi);
  const type = trimSpace(base.toLowerCase());
  if (!validType(type)) return null;
  const params = new Map<string, string>();
  let continuation: Map<string, Map<string, string>> | null = null;
  let i = base.length;
  while (i < value.length) {
    i = skipSpace(value, i);
    if (i >= value.length) break;
    const start = i;
    // consumeMediaParam: `;` white space token white space `=` white space value
    let ok = value[i] === ';';
    let key = '';
    let v = '';
    if (ok) {
      i = skipSpace(value, i + 1);
      const n = tokenLength(value, i);
      key = value.slice(i, i + n).toLowerCase();
      i = skipSpace(value, i + n);
      ok = n > 0 && value[i] === '=';
    }
    if (ok) {
      i = skipSpace(value, i + 1);
      if (value[i] === '"') {
        const q = quoted(value, i);
        ok = q !== null;
        if (q) {
          v = q.value;
          i = q.end;
        }
      } else {
        const n = tokenLength(value, i);
        ok = n > 0;
        v = value.slice(i, i + n);
        i += n;
      }
    }
    if (!ok) {
      // Only a trailing `;` (with white space around it) is not an error.
      if (trimSpace(value.slice(start)) === ';') break;
      return null;
    }
    let map = params;
    const star = key.indexOf('*');
    if (star !== -1) {
      continuation ??= new Map();
      const baseName = key.slice(0, star);
      let m = continuation.get(baseName);
      if (!m) continuation.set(baseName, (m = new Map()));
      map = m;
    }
    const seen = map.get(key);
    if (seen !== undefined && seen !== v) return null;
    map.set(key, v);
  }
  if (continuation) {
    for (const [key, pieces] of continuation) {
      const single = pieces.get(key + '*');
      if (single !== undefined) {
        const d = decode2231(single);
        if (d !== null) params.set(key, d);
        continue;
      }
      let out = '';
      let valid = false;
      for (let n = 0; ; n++) {
        const simple = pieces.get(`${key}*${n}`);
        if (simple !== undefined) {
          valid = true;
          out += simple;
          continue;
        }
        const encoded = pieces.get(`${key}*${n}*`);
        if (encoded === undefined) break;
        valid = true;
        if (n === 0) {
          const d = decode2231(encoded);
          if (d !== null) out += d;
        } else {
          // Go ignores the error here and appends what it got: nothing.
          out += percentUnescape(encoded) ?? '';
        }
      }
      if (valid) params.set(key, out);
    }
  }
  return { type, params };
}
