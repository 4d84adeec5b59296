/**
 * Decodes a request body for inspection only; the original bytes are forwarded untouched.
 * A content-encoding sluice cannot decode is refused rather than passed through, or compressing
 * a body would be enough to skip the free-tier check.
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw } from 'node:zlib';

export type Decoded = { ok: true; body: Buffer } | { ok: false; status: 413 | 415 | 400; reason: string };

type AsyncDecoder = (input: Buffer, maxOutputLength: number) => Promise<Buffer>;

const gunzipAsync = promisify(gunzip);
const inflateZlibAsync = promisify(inflate);
const inflateRawAsync = promisify(inflateRaw);
const brotliAsync = promisify(brotliDecompress);

/**
 * Decoders run in zlib's thread pool: a small body can inflate to `maxBytes`, and inflating 32 MB
 * with the *Sync functions would hold the event loop for tens of milliseconds. HTTP's "deflate" is
 * zlib-wrapped (RFC 9110), but some clients send raw deflate; browsers and curl accept both, so it
 * is decided by the zlib header rather than refused when the relay might accept it.
 */
const DECODERS = new Map<string, AsyncDecoder>([
  ['gzip', (input, maxOutputLength) => gunzipAsync(input, { maxOutputLength })],
  ['x-gzip', (input, maxOutputLength) => gunzipAsync(input, { maxOutputLength })],
  ['deflate', (input, maxOutputLength) => (hasZlibHeader(input) ? inflateZlibAsync : inflateRawAsync)(input, { maxOutputLength })],
  ['br', (input, maxOutputLength) => brotliAsync(input, { maxOutputLength })],
]);

/** The codings a Content-Encoding field lists, in the order applied, without `identity` (no coding). */
function listedCodings(contentEncoding: string): string[] {
  // Empty list elements are legal in HTTP field values (RFC 9110 section 5.6.1).
  return contentEncoding
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
}

/**
 * Whether a body sent with this Content-Encoding must go through decodeBody before it can be read:
 * any listed coding, one sluice cannot undo included (decodeBody answers that one with a 415).
 */
export function needsDecoding(contentEncoding: string | undefined): boolean {
  return contentEncoding !== undefined && listedCodings(contentEncoding).length > 0;
}

/** The codings to undo, last applied first, or the 415 for one sluice cannot undo. */
function codingsToUndo(contentEncoding: string | undefined): string[] | Decoded {
  const codings = listedCodings(contentEncoding ?? '');
  for (const coding of codings) {
    if (!DECODERS.has(coding)) return { ok: false, status: 415, reason: `unsupported content-encoding "${coding}"` };
  }
  // Codings are listed in the order they were applied, so they are undone last to first.
  return codings.reverse();
}

function failed(coding: string, err: unknown, maxBytes: number): Decoded {
  if (isTooLarge(err)) return tooLarge(maxBytes);
  const detail = err instanceof Error ? `: ${err.message}` : '';
  return { ok: false, status: 400, reason: `body is not valid ${coding} data${detail}` };
}

/** zlib refuses a limit below 1; the length check after each layer still enforces a smaller one. */
const zlibLimit = (maxBytes: number): number => Math.max(1, Math.floor(maxBytes));

export async function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Promise<Decoded> {
  const codings = codingsToUndo(contentEncoding);
  if (!Array.isArray(codings)) return codings;
  let out = body;
  for (const coding of codings) {
    try {
      out = await DECODERS.get(coding)!(out, zlibLimit(maxBytes));
    } catch (err) {
      return failed(coding, err, maxBytes);
    }
    if (out.length > maxBytes) return tooLarge(maxBytes);
  }
  return { ok: true, body: out };
}

function tooLarge(maxBytes: number): Decoded {
  return { ok: false, status: 413, reason: `decoded body exceeds ${maxBytes} bytes` };
}

function isTooLarge(err: unknown): boolean {
  return err instanceof RangeError && 'code' in err && err.code === 'ERR_BUFFER_TOO_LARGE';
}

function hasZlibHeader(input: Buffer): boolean {
  const cmf = input[0];
  const flg = input[1];
  if (cmf === undefined || flg === undefined) return false;
  return (cmf & 0x0f) === 8 && ((cmf << 8) | flg) % 31 === 0;
}
