/** Decodes a request body for inspection only; the original bytes are forwarded. */
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

export type Decoded = { ok: true; body: Buffer } | { ok: false; status: 413 | 415 | 400; reason: string };

export function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Decoded {
  if (contentEncoding === undefined) return { ok: true, body };
  const codings = contentEncoding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  let out = body;
  for (let i = codings.length - 1; i >= 0; i--) {
    const c = codings[i]!;
    const opts = { maxOutputLength: maxBytes };
    try {
      if (c === 'gzip' || c === 'x-gzip') out = gunzipSync(out, opts);
      else if (c === 'deflate') out = inflateSync(out, opts);
      else if (c === 'br') out = brotliDecompressSync(out, opts);
      else return { ok: false, status: 415, reason: `unsupported content-encoding "${c}"` };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || /maxOutputLength|too large/i.test((err as Error).message)) {
        return { ok: false, status: 413, reason: `decoded body exceeds ${maxBytes} bytes` };
      }
      return { ok: false, status: 400, reason: `body is not valid ${c} data` };
    }
  }
  return { ok: true, body: out };
}
