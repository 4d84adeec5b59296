/**
 * Decodes a request body for inspection only; the original bytes are forwarded untouched.
 * A content-encoding sluice cannot decode is refused rather than passed through, or compressing
 * a body would be enough to skip the free-tier check.
 */
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';
import type { ZlibOptions } from 'node:zlib';

export type Decoded = { ok: true; body: Buffer } | { ok: false; status: 413 | 415 | 400; reason: string };

type Decoder = (input: Buffer, maxOutputLength: number) => Buffer;

const gunzip: Decoder = (input, maxOutputLength) => gunzipSync(input, { maxOutputLength });

/**
 * HTTP's "deflate" is zlib-wrapped (RFC 9110), but some clients send raw deflate; browsers and
 * curl accept both, so decide by the zlib header rather than refuse what the relay might accept.
 */
const inflate: Decoder = (input, maxOutputLength) => {
  const options: ZlibOptions = { maxOutputLength };
  return hasZlibHeader(input) ? inflateSync(input, options) : inflateRawSync(input, options);
};

const DECODERS = new Map<string, Decoder>([
  ['gzip', gunzip],
  ['x-gzip', gunzip],
  ['deflate', inflate],
  ['br', (input, maxOutputLength) => brotliDecompressSync(input, { maxOutputLength })],
]);

export function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Decoded {
  // Empty list elements are legal in HTTP field values (RFC 9110 section 5.6.1).
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');

  const decoders: Array<[string, Decoder]> = [];
  for (const coding of codings) {
    const decoder = DECODERS.get(coding);
    if (decoder === undefined) return { ok: false, status: 415, reason: `unsupported content-encoding "${coding}"` };
    decoders.push([coding, decoder]);
  }

  // zlib refuses a limit below 1; the length check below still enforces a smaller one.
  const limit = Math.max(1, Math.floor(maxBytes));
  let out = body;
  // Codings are listed in the order they were applied, so they are undone last to first.
  for (let i = decoders.length - 1; i >= 0; i--) {
    const [coding, decoder] = decoders[i]!;
    try {
      out = decoder(out, limit);
    } catch (err) {
      if (isTooLarge(err)) return tooLarge(maxBytes);
      const detail = err instanceof Error ? `: ${err.message}` : '';
      return { ok: false, status: 400, reason: `body is not valid ${coding} data${detail}` };
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
