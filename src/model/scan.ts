/**
 * Reads the top-level `model` of a JSON request body the way the relay does (Go's encoding/json
 * decoding into `struct { Model string `json:"model"` }`), without parsing the whole document:
 * JSON.parse of a large body builds every string and object in it while the event loop waits,
 * while jumping over string contents with Buffer.indexOf touches little more than the top level.
 *
 * Any disagreement with the relay lets a client be counted against one model while being served
 * another, so the rules below mirror Go's decoder rather than what looks reasonable:
 * - only top-level keys count, and they are matched after unescaping and ignoring ASCII case;
 * - every matching key assigns in document order, so in Go the last one wins; but current
 *   new-api reads JSON bodies with gjson, where the exact key `model` matches and the FIRST
 *   one wins. Two matching keys with different string values are therefore refused (both
 *   relay versions then agree with sluice, whichever one is deployed);
 * - `null` leaves the previous value alone, any other non-string value fails the whole decode;
 * - string escapes, lone surrogates and invalid UTF-8 decode as Go decodes them.
 * Structure is checked only as far as needed to find the top level reliably: strings, bracket
 * balance and nesting depth everywhere, full grammar at the top level only. A document Go would
 * refuse may therefore scan as `found`; that is harmless, because the relay refuses it anyway.
 */

import type { StructureHints } from './prepass.js';

export type ModelScan =
  | { kind: 'found'; model: string }
  | { kind: 'absent' }
  | { kind: 'not-object' }
  | { kind: 'invalid'; reason: string }
  /** Past a bound on what the scan reads (MAX_TOP_LEVEL_MEMBERS, MAX_MODEL_BYTES): not read. */
  | { kind: 'unread'; reason: string };

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const UPPER_E = 0x45;
const LBRACKET = 0x5b;
const BACKSLASH = 0x5c;
const RBRACKET = 0x5d;
const LOWER_E = 0x65;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');

/** Go's scanner refuses documents nested deeper than this (encoding/json maxNestingDepth). */
export const MAX_DEPTH = 10_000;

/**
 * Strings shorter than this are searched byte by byte: most JSON strings are a few bytes long,
 * and the native indexOf call costs more than a few dozen comparisons.
 */
export const INLINE_STRING_SCAN = 32;

const MODEL = 'model';
/** Each of the five characters of `model` may be spelt as a six-byte `\uXXXX` escape. */
const MODEL_KEY_MAX_RAW = MODEL.length * 6;

/** Thrown inside the scanner only; scanModel turns it into `{ kind: 'invalid' }`. */
class ScanError extends Error {}
/** Thrown inside the scanner only; scanModel turns it into `{ kind: 'unread' }`. */
class ScanBound extends Error {}

/**
 * The scan's bounds. Reading the model walks the top level at once when the body has arrived, and
 * decodes each `model` value whole: an 8 MiB body of `"\u006dodel":"x",` members (20 KB
 * gzipped) held the event loop for a third of a second, an 8 MiB escaped model as long (an
 * attacker's probe).
 * No request of any of the relay's protocols has more than a few dozen top-level fields, or a
 * model id of more than a few hundred bytes; past these the body gets 400, and nothing is
 * forwarded. Constants, not settings: no client needs more.
 */
export const MAX_TOP_LEVEL_MEMBERS = 1_000;
export const MAX_MODEL_BYTES = 64 * 1024;

function fail(reason: string): never {
  throw new ScanError(reason);
}

function describeAt(buf: Buffer, pos: number): string {
  const c = buf[pos];
  if (c === undefined) return 'end of body';
  return c >= SPACE && c < 0x7f ? `'${String.fromCharCode(c)}' at byte ${pos}` : `byte 0x${c.toString(16)} at ${pos}`;
}

function unexpected(buf: Buffer, pos: number, wanted: string): never {
  const prefix = pos >= buf.length ? 'truncated: ' : '';
  fail(`${prefix}expected ${wanted}, found ${describeAt(buf, pos)}`);
}

/**
 * @param hints where large values end, read while the body arrived (prepass.ts); they spare the
 * walk through those values and never change the answer.
 */
export function scanModel(body: Buffer, hints?: StructureHints): ModelScan {
  // Go refuses a BOM outright, so skipping it can only make sluice see a model the relay rejects.
  let pos = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  pos = skipWhitespace(body, pos);
  if (body[pos] !== LBRACE) return { kind: 'not-object' };
  try {
    return scanTopLevelObject(body, pos + 1, hints);
  } catch (err) {
    if (err instanceof ScanError) return { kind: 'invalid', reason: err.message };
    if (err instanceof ScanBound) return { kind: 'unread', reason: err.message };
    throw err;
  }
}

function scanTopLevelObject(buf: Buffer, start: number, hints: StructureHints | undefined): ModelScan {
  let model: string | undefined;
  let pos = skipWhitespace(buf, start);
  let members = 0;
  if (buf[pos] !== RBRACE) {
    for (;;) {
      if (++members > MAX_TOP_LEVEL_MEMBERS) throw new ScanBound(`the body's JSON object has more than ${MAX_TOP_LEVEL_MEMBERS} top-level fields`);
      if (buf[pos] !== QUOTE) unexpected(buf, pos, 'a key string');
      const keyEnd = hints?.stringEnd(pos + 1) ?? stringEnd(buf, pos + 1);
      const isModel = isModelKey(buf, pos + 1, keyEnd);
      pos = valueStart(buf, keyEnd);

      if (isModel) {
        const c = buf[pos];
        if (c === QUOTE) {
          const valueEnd = hints?.stringEnd(pos + 1) ?? stringEnd(buf, pos + 1);
          if (valueEnd - pos - 1 > MAX_MODEL_BYTES) throw new ScanBound(`the "model" field is longer than ${MAX_MODEL_BYTES} bytes`);
          const value = decodeString(buf, pos + 1, valueEnd);
          if (model !== undefined && model !== value) {
            fail('conflicting top-level "model" fields (relays disagree on which one counts)');
          }
          model = value;
          pos = valueEnd + 1;
        } else if (c === NULL[0]) {
          pos = skipLiteral(buf, pos, NULL);
        } else if (c === undefined) {
          unexpected(buf, pos, 'a value');
        } else {
          fail(`"model" must be a string, found ${describeAt(buf, pos)}`);
        }
      } else {
        pos = skipValue(buf, pos, hints);
      }

      pos = skipWhitespace(buf, pos);
      if (buf[pos] !== COMMA) break;
      pos = skipWhitespace(buf, pos + 1);
    }
  }
  endTopLevelObject(buf, pos);
  return model === undefined ? { kind: 'absent' } : { kind: 'found', model };
}

/** Where the value starts of a member whose key string closes at `keyEnd`: past the ':' and the whitespace around it. */
function valueStart(buf: Buffer, keyEnd: number): number {
  const pos = skipWhitespace(buf, keyEnd + 1);
  if (buf[pos] !== COLON) unexpected(buf, pos, "':'");
  return skipWhitespace(buf, pos + 1);
}

/**
 * The top-level object's members end at `pos` (no ',' stands there): its '}' must, and after it
 * nothing but whitespace.
 */
function endTopLevelObject(buf: Buffer, pos: number): void {
  if (buf[pos] !== RBRACE) unexpected(buf, pos, "',' or '}'");
  pos = skipWhitespace(buf, pos + 1);
  if (pos < buf.length) fail(`unexpected ${describeAt(buf, pos)} after the top-level object`);
}

function skipWhitespace(buf: Buffer, pos: number): number {
  for (;;) {
    const c = buf[pos];
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return pos;
    pos++;
  }
}

/** Index of the quote closing the string whose contents start at `from`. */
function stringEnd(buf: Buffer, from: number): number {
  const len = buf.length;
  let pos = from;
  for (;;) {
    const inlineLimit = Math.min(pos + INLINE_STRING_SCAN, len);
    while (pos < inlineLimit) {
      const c = buf[pos];
      if (c === QUOTE) return pos;
      pos += c === BACKSLASH ? 2 : 1;
    }
    const quote = pos < len ? buf.indexOf(QUOTE, pos) : -1;
    if (quote === -1) fail(`truncated: string starting at byte ${from - 1} is not closed`);
    // A quote ends the string unless preceded by an odd run of backslashes; the run cannot reach
    // back past the opening quote, so counting it needs no lower bound.
    let i = quote - 1;
    while (buf[i] === BACKSLASH) i--;
    if (((quote - 1 - i) & 1) === 0) return quote;
    // Escaped quotes tend to come in clusters (JSON inside JSON), so look nearby before
    // paying for another native call.
    pos = quote + 1;
  }
}

function skipValue(buf: Buffer, pos: number, hints: StructureHints | undefined): number {
  const c = buf[pos];
  switch (c) {
    case QUOTE:
      return (hints?.stringEnd(pos + 1) ?? stringEnd(buf, pos + 1)) + 1;
    case LBRACE:
    case LBRACKET:
      return hints?.containerEnd(pos) ?? skipContainer(buf, pos);
    case TRUE[0]:
      return skipLiteral(buf, pos, TRUE);
    case FALSE[0]:
      return skipLiteral(buf, pos, FALSE);
    case NULL[0]:
      return skipLiteral(buf, pos, NULL);
    default:
      if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) return skipNumber(buf, pos);
      unexpected(buf, pos, 'a value');
  }
}

/** Skips a nested object or array by matching brackets outside strings. */
function skipContainer(buf: Buffer, start: number): number {
  const closers: number[] = [];
  const len = buf.length;
  let pos = start;
  while (pos < len) {
    const c = buf[pos]!;
    if (c === QUOTE) {
      pos = stringEnd(buf, pos + 1) + 1;
      continue;
    }
    // `[` and `{` differ only in bit 0x20, as do `]` and `}`: one comparison each on this hot path.
    const folded = c | 0x20;
    if (folded === LBRACE) {
      // The top-level object is the first level.
      if (closers.length + 2 > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH} levels at byte ${pos}`);
      closers.push(c === LBRACE ? RBRACE : RBRACKET);
    } else if (folded === RBRACE) {
      if (closers.pop() !== c) fail(`mismatched ${describeAt(buf, pos)}`);
      if (closers.length === 0) return pos + 1;
    }
    pos++;
  }
  fail(`truncated: ${closers.length} container(s) opened at or after byte ${start} are not closed`);
}

function skipLiteral(buf: Buffer, pos: number, literal: Buffer): number {
  for (let i = 0; i < literal.length; i++) {
    if (buf[pos + i] !== literal[i]) unexpected(buf, pos + i, `'${literal.toString()}'`);
  }
  return pos + literal.length;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= NINE;
}

function skipNumber(buf: Buffer, pos: number): number {
  if (buf[pos] === MINUS) pos++;
  if (buf[pos] === ZERO) {
    pos++;
  } else if (isDigit(buf[pos])) {
    while (isDigit(buf[pos])) pos++;
  } else {
    unexpected(buf, pos, 'a digit');
  }
  if (buf[pos] === DOT) {
    pos++;
    if (!isDigit(buf[pos])) unexpected(buf, pos, 'a digit');
    while (isDigit(buf[pos])) pos++;
  }
  const e = buf[pos];
  if (e === LOWER_E || e === UPPER_E) {
    pos++;
    const sign = buf[pos];
    if (sign === PLUS || sign === MINUS) pos++;
    if (!isDigit(buf[pos])) unexpected(buf, pos, 'a digit');
    while (isDigit(buf[pos])) pos++;
  }
  return pos;
}

function isModelKey(buf: Buffer, start: number, end: number): boolean {
  const rawLength = end - start;
  if (rawLength === MODEL.length) {
    // Five raw bytes without an escape or a control character (which decodeString must judge:
    // they can make the body invalid) are compared as bytes; | 0x20 folds ASCII case, and no byte
    // other than a letter's two cases folds onto m, o, d, e or l.
    let same = true;
    let plain = true;
    for (let i = 0; i < MODEL.length; i++) {
      const b = buf[start + i]!;
      if (b === BACKSLASH || b < SPACE) plain = false;
      else if ((b | 0x20) !== MODEL.charCodeAt(i)) same = false;
    }
    if (plain) return same;
  }
  if (rawLength < MODEL.length || rawLength > MODEL_KEY_MAX_RAW) return false;
  const first = buf[start];
  if (first !== 0x6d && first !== 0x4d && first !== BACKSLASH) return false;
  const key = decodeString(buf, start, end);
  if (key.length !== MODEL.length) return false;
  // Go also folds non-ASCII letters (Kelvin sign to k, long s to s), but none folds onto
  // a letter of "model", so ASCII folding gives the same answer here.
  for (let i = 0; i < MODEL.length; i++) {
    let c = key.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    if (c !== MODEL.charCodeAt(i)) return false;
  }
  return true;
}

function hexDigit(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= ZERO && c <= NINE) return c - ZERO;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/** The code unit of the four hex digits at `pos`, or -1. */
function hex4(buf: Buffer, pos: number): number {
  let value = 0;
  for (let i = 0; i < 4; i++) {
    const d = hexDigit(buf[pos + i]);
    if (d < 0) return -1;
    value = (value << 4) | d;
  }
  return value;
}

/**
 * Length of the well-formed UTF-8 sequence at `pos`, or 0. Mirrors Go's utf8.DecodeRune, which
 * turns each byte of an ill-formed sequence into its own U+FFFD (TextDecoder would emit one
 * U+FFFD per maximal subpart instead, e.g. one for a truncated three-byte sequence, not two).
 */
function utf8SequenceLength(buf: Buffer, pos: number, end: number): number {
  const c = buf[pos];
  if (c === undefined) return 0;
  let continuation: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    continuation = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    continuation = 2;
    if (c === 0xe0) lo = 0xa0;
    else if (c === 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    continuation = 3;
    if (c === 0xf0) lo = 0x90;
    else if (c === 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (pos + continuation >= end) return 0;
  const second = buf[pos + 1];
  if (second === undefined || second < lo || second > hi) return 0;
  for (let i = 2; i <= continuation; i++) {
    const next = buf[pos + i];
    if (next === undefined || next < 0x80 || next > 0xbf) return 0;
  }
  return continuation + 1;
}

const SIMPLE_ESCAPES = new Map<number, string>([
  [QUOTE, '"'],
  [BACKSLASH, '\\'],
  [SLASH, '/'],
  [0x62, '\b'],
  [0x66, '\f'],
  [0x6e, '\n'],
  [0x72, '\r'],
  [0x74, '\t'],
]);

/** Decodes the contents of a JSON string, byte range [start, end), as Go's unquote does. */
function decodeString(buf: Buffer, start: number, end: number): string {
  const parts: string[] = [];
  let runStart = start;
  let pos = start;
  while (pos < end) {
    const c = buf[pos]!;
    if (c >= SPACE && c < 0x80 && c !== BACKSLASH) {
      pos++;
      continue;
    }
    if (c < SPACE) fail(`control character 0x${c.toString(16)} in string at byte ${pos}`);
    if (c >= 0x80) {
      const size = utf8SequenceLength(buf, pos, end);
      if (size > 0) {
        pos += size;
        continue;
      }
      runStart = pos = replaceIllFormedByte(buf, parts, runStart, pos);
      continue;
    }

    if (pos > runStart) parts.push(buf.toString('utf8', runStart, pos));
    const escapeByte = buf[pos + 1];
    const simple = escapeByte === undefined ? undefined : SIMPLE_ESCAPES.get(escapeByte);
    if (simple !== undefined) {
      parts.push(simple);
      pos += 2;
    } else if (escapeByte === 0x75) {
      const unit = hex4(buf, pos + 2);
      if (unit < 0 || pos + 6 > end) fail(`invalid \\u escape at byte ${pos}`);
      pos += 6;
      if (unit >= 0xd800 && unit <= 0xdfff) {
        // Go pairs a high surrogate with an immediately following low one; anything else
        // becomes U+FFFD and the next escape is decoded on its own.
        const low = buf[pos] === BACKSLASH && buf[pos + 1] === 0x75 && pos + 6 <= end ? hex4(buf, pos + 2) : -1;
        if (unit <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
          parts.push(String.fromCharCode(unit, low));
          pos += 6;
        } else {
          parts.push('\uFFFD');
        }
      } else {
        parts.push(String.fromCharCode(unit));
      }
    } else {
      fail(`invalid escape at byte ${pos}`);
    }
    runStart = pos;
  }
  if (runStart === start) return buf.toString('utf8', start, end);
  if (end > runStart) parts.push(buf.toString('utf8', runStart, end));
  return parts.join('');
}

/**
 * Pushes the text of the run [runStart, pos) and a U+FFFD for the byte at `pos`, which begins no
 * well-formed UTF-8 sequence; returns where the next run starts, past that byte.
 */
function replaceIllFormedByte(buf: Buffer, parts: string[], runStart: number, pos: number): number {
  if (pos > runStart) parts.push(buf.toString('utf8', runStart, pos));
  parts.push('\uFFFD');
  return pos + 1;
}

/**
 * Bytes as a Go string becomes valid UTF-8 when encoding/json writes it: each byte of an ill-formed
 * sequence turns into its own U+FFFD.
 */
export function decodeGoString(buf: Buffer): string {
  let pos = 0;
  for (; pos < buf.length; pos++) if (buf[pos]! >= 0x80) break;
  if (pos === buf.length) return buf.toString('latin1');
  const parts: string[] = [buf.toString('latin1', 0, pos)];
  let runStart = pos;
  while (pos < buf.length) {
    const c = buf[pos]!;
    if (c < 0x80) {
      pos++;
      continue;
    }
    const size = utf8SequenceLength(buf, pos, buf.length);
    if (size > 0) {
      pos += size;
      continue;
    }
    runStart = pos = replaceIllFormedByte(buf, parts, runStart, pos);
  }
  if (buf.length > runStart) parts.push(buf.toString('utf8', runStart, buf.length));
  return parts.join('');
}

/**
 * How the relay decodes a JSON body into what it reads a field from:
 * - `struct`: encoding/json into a struct with string fields; names match ignoring case, every
 *   match assigns in document order (the last wins), `null` leaves the field alone and any other
 *   non-string fails the decode;
 * - `map`: encoding/json into `map[string]any`, then `m[name].(string)`: the exact name, the last
 *   one wins, and a value that is no string reads as "".
 */
export type FieldMode = 'struct' | 'map';

export type FieldsScan = { kind: 'found'; values: (string | undefined)[] } | { kind: 'not-object' } | { kind: 'invalid'; reason: string };

/**
 * The top-level string fields `names` of a JSON object, read as `mode` says; undefined for a field
 * that is absent (or, in struct mode, only ever null). For the rarely used routes whose relay
 * middleware reads fields other than `model` (Midjourney's action, the Kling and Jimeng adapters);
 * `scanModel` stays the lean path for `model` itself.
 */
export function scanStringFields(body: Buffer, names: readonly string[], mode: FieldMode, matches: (key: string, name: string) => boolean): FieldsScan {
  let pos = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  pos = skipWhitespace(body, pos);
  if (body[pos] !== LBRACE) return { kind: 'not-object' };
  const values: (string | undefined)[] = names.map(() => undefined);
  try {
    pos = skipWhitespace(body, pos + 1);
    if (body[pos] !== RBRACE) {
      for (;;) {
        if (body[pos] !== QUOTE) unexpected(body, pos, 'a key string');
        const keyEnd = stringEnd(body, pos + 1);
        const key = decodeString(body, pos + 1, keyEnd);
        pos = valueStart(body, keyEnd);
        let value: string | null | undefined;
        if (body[pos] === QUOTE) {
          const valueEnd = stringEnd(body, pos + 1);
          value = decodeString(body, pos + 1, valueEnd);
          pos = valueEnd + 1;
        } else {
          const start = pos;
          pos = skipValue(body, pos, undefined);
          value = body[start] === NULL[0] ? null : undefined;
        }
        for (let i = 0; i < names.length; i++) {
          if (!(mode === 'map' ? key === names[i] : matches(key, names[i]!))) continue;
          if (mode === 'map') values[i] = typeof value === 'string' ? value : '';
          else if (typeof value === 'string') values[i] = value;
          else if (value === undefined) fail(`"${key}" must be a string`);
        }
        pos = skipWhitespace(body, pos);
        if (body[pos] !== COMMA) break;
        pos = skipWhitespace(body, pos + 1);
      }
    }
    endTopLevelObject(body, pos);
    return { kind: 'found', values };
  } catch (err) {
    if (err instanceof ScanError) return { kind: 'invalid', reason: err.message };
    throw err;
  }
}
