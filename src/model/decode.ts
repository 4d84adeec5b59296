/**
 * Decodes a request body for inspection only, exactly where the relay decodes it; the original
 * bytes are forwarded untouched.
 */
import type { Transform } from 'node:stream';
import * as zlib from 'node:zlib';

// Node 20's types lack zlib's zstd; remove this once @types/node leaves the 20 line (docs/development.md).
declare module 'zlib' {
  /** Node 22.15, 23.8 and later (the image's Node 26 among them); absent in Node 20, which these types describe. */
  const createZstdDecompress: ((options?: { chunkSize?: number; params?: Record<number, number> }) => Transform) | undefined;
  namespace constants {
    const ZSTD_d_windowLogMax: number | undefined;
  }
}

/**
 * `held`: bytes taken from the budget for `body`, to be given back once it has been read. A
 * failure says what went wrong; the gateway's refusal table decides what the client is answered.
 */
export type Decoded = { ok: true; body: Buffer; held: number } | { ok: false; problem: BodyProblem | 'busy'; reason: string };

/** Why a body cannot be read for its model: not valid, decoded past its bound, or in a content-encoding sluice cannot decode. */
export type BodyProblem = 'invalid' | 'too_large' | 'unsupported_encoding';

/** Where decoded bytes are counted (a request's BodyLease, src/http/body-budget.ts). */
export interface DecodeBudget {
  take(n: number): boolean;
  give(n: number): void;
}

/** The codings the relay undoes before it reads a body. */
export type RelayCoding = 'gzip' | 'br' | 'zstd';

/**
 * The coding the relay undoes before anything reads the body, as new-api's
 * DecompressRequestMiddleware does: a Content-Encoding of exactly `gzip`, `br` or `zstd`,
 * compared as written (HTTP's surrounding spaces and tabs aside, which Node and Go both trim), on
 * any method but GET. Any other value (`deflate`, `x-gzip`, `GZIP`, `identity`, a list such as
 * `identity, gzip`) is left as sent and the relay reads the body raw: so does sluice. Decoding what
 * the relay reads raw would let one body be read two ways: a raw-deflate stored block whose bytes
 * are also a JSON object naming a free model was counted as the paid call it inflated to.
 * Lines of a repeated Content-Encoding reach the relay as Node's one joined value (`gzip, gzip`:
 * http-proxy forwards the parsed headers), which both read as sent.
 */
export function relayCoding(method: string, contentEncoding: string | undefined): RelayCoding | null {
  if (method === 'GET') return null;
  return contentEncoding === 'gzip' || contentEncoding === 'br' || contentEncoding === 'zstd' ? contentEncoding : null;
}

/** Output slices per thread-pool round trip: fewer trips than zlib's 16 KB default. */
const CHUNK = 64 * 1024;

/** How one body is decoded: its decoder, and the memory that decoder may hold besides its output. */
interface Decoding {
  open(): Transform;
  workingSet: number;
}

/**
 * Decoders are zlib streams running in its thread pool (inflating megabytes on the event loop
 * would hold every other request), and their output is counted as it comes out: a bomb stops
 * at the limit, or when the bodies' budget cannot take more, without ever being held whole.
 */
function decodingFor(coding: RelayCoding, input: Buffer, maxBytes: number): Decoding | Decoded {
  if (coding === 'gzip') return { open: () => zlib.createGunzip({ chunkSize: CHUNK }), workingSet: ZLIB_WORKING_SET };
  if (coding === 'br') return { open: () => zlib.createBrotliDecompress({ chunkSize: CHUNK }), workingSet: brotliWorkingSet(input) };
  return zstdDecoding(input, maxBytes);
}

/** A zlib inflater's own memory: its state, its 32 KB window and its first output chunk, rounded up. */
const ZLIB_WORKING_SET = 128 * 1024;

/**
 * Huffman tables a brotli stream can make its decoder build: up to 256 trees each for literals,
 * commands and distances (about 0.6, 1.1 and 1.2 MB at their largest), rounded up.
 */
const BROTLI_TABLES = 3 * 1024 * 1024;

/**
 * A brotli decoder's own memory: its ring buffer, as large as the window the stream's header
 * declares (RFC 7932 section 9.1: up to 16 MiB, which a body of a few bytes can ask for), its
 * tables and its first output chunk.
 */
export function brotliWorkingSet(input: Buffer): number {
  const b = input[0] ?? 0;
  let wbits: number;
  if ((b & 1) === 0) wbits = 16;
  else if ((b >> 1) & 7) wbits = 17 + ((b >> 1) & 7);
  else if ((b >> 4) & 7) wbits = 8 + ((b >> 4) & 7);
  else wbits = 17;
  return 2 ** wbits + BROTLI_TABLES + CHUNK;
}

/**
 * The largest window a zstd frame may ask of the decoder, as a power of two: 8 MiB, what zstd's
 * levels up to 19 use, or maxDecodedBodyBytes rounded up when larger (a frame of one segment,
 * what one-shot compression writes, asks its content's size). A frame asking more (`--long`) is
 * refused as invalid data (400) before its window is allocated.
 */
const ZSTD_WINDOW_LOG_MIN_CAP = 23;
/** zstd's largest block: its decoder holds one of input and one of output beside the window. */
const ZSTD_BLOCK = 128 * 1024;
/** A zstd decoder's own state (about 100 KB measured on Node 26), rounded up. */
const ZSTD_CONTEXT = 128 * 1024;

/**
 * zstd, where the runtime has a decoder (Node 22.15 and later: the image's Node 26; not Node 20,
 * where such a body gets 415). The decoder's window is bounded by the first frame's own, and that
 * window is its working set: a later frame asking more is refused. A frame of one segment that
 * declares more content than `maxBytes` is refused as too large before anything is decoded.
 */
function zstdDecoding(input: Buffer, maxBytes: number): Decoding | Decoded {
  const create = zlib.createZstdDecompress;
  const windowLogMax = zlib.constants.ZSTD_d_windowLogMax;
  if (create === undefined || windowLogMax === undefined)
    return { ok: false, problem: 'unsupported_encoding', reason: 'unsupported content-encoding "zstd" (this Node has no zstd decoder)' };
  const frame = zstdFrame(input);
  if (frame?.oneSegment && frame.window > maxBytes) return tooLarge(maxBytes);
  const cap = Math.max(ZSTD_WINDOW_LOG_MIN_CAP, Math.ceil(Math.log2(Math.max(maxBytes, 1))));
  const windowLog = Math.min(cap, Math.max(10, Math.ceil(Math.log2(Math.max(frame?.window ?? 2 ** cap, 1)))));
  return {
    open: () => create({ chunkSize: CHUNK, params: { [windowLogMax]: windowLog } }),
    workingSet: 2 ** windowLog + 2 * Math.min(2 ** windowLog, ZSTD_BLOCK) + ZSTD_CONTEXT + CHUNK,
  };
}

/**
 * The window a zstd body's first frame declares (RFC 8878 section 3.1.1.1), and whether that frame
 * is one segment (its window is then its content's size); null when the body does not start with
 * a frame's header.
 */
export function zstdFrame(input: Buffer): { window: number; oneSegment: boolean } | null {
  if (input.length < 6 || input.readUInt32LE(0) !== 0xfd2fb528) return null;
  const descriptor = input[4]!;
  if ((descriptor & 0x20) === 0) {
    // A window descriptor: exponent and mantissa.
    const w = input[5]!;
    const base = 2 ** (10 + (w >> 3));
    return { window: base + (base / 8) * (w & 7), oneSegment: false };
  }
  // One segment: the window is the content size, after the dictionary id.
  const at = 5 + [0, 1, 2, 4][descriptor & 3]!;
  const size = [1, 2, 4, 8][descriptor >> 6]!;
  if (input.length < at + size) return null;
  let window: number;
  if (size === 1) window = input[at]!;
  else if (size === 2) window = input.readUInt16LE(at) + 256;
  else if (size === 4) window = input.readUInt32LE(at);
  else window = Number(input.readBigUInt64LE(at));
  return { window, oneSegment: true };
}

function failed(coding: string, err: unknown): Decoded {
  const detail = err instanceof Error ? `: ${err.message}` : '';
  return { ok: false, problem: 'invalid', reason: `body is not valid ${coding} data${detail}` };
}

const BUSY: Decoded = { ok: false, problem: 'busy', reason: 'the request bodies in flight are at their memory budget' };

/**
 * Undoes one coding of `input`, at most `maxBytes` of output, each output chunk taken from
 * `budget` as it comes out (and the decoder's own memory for as long as it runs). On success
 * the output stays taken; on failure everything this layer took is given back.
 */
function undo(coding: RelayCoding, decoding: Decoding, input: Buffer, maxBytes: number, budget: DecodeBudget | null): Promise<Buffer | Decoded> {
  const workingSet = decoding.workingSet;
  if (budget !== null && !budget.take(workingSet)) return Promise.resolve(BUSY);
  return new Promise((resolve) => {
    const z = decoding.open();
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (r: Buffer | Decoded): void => {
      if (settled) return;
      settled = true;
      if (budget !== null) budget.give(workingSet + (Buffer.isBuffer(r) ? 0 : size));
      resolve(r);
    };
    const stop = (r: Decoded): void => {
      chunks.length = 0;
      z.destroy();
      settle(r);
    };
    z.on('data', (c: Buffer) => {
      if (settled) return;
      if (size + c.length > maxBytes) return stop(tooLarge(maxBytes));
      if (budget !== null && !budget.take(c.length)) return stop(BUSY);
      size += c.length;
      chunks.push(c);
    });
    z.on('end', () => settle(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    z.on('error', (err) => settle(failed(coding, err)));
    z.end(input);
  });
}

/**
 * The body with the relay's coding undone, at most `maxBytes` of it. With a budget, the decoded
 * bytes are counted in it (`held` says how many to give back once read).
 */
export async function decodeBody(body: Buffer, coding: RelayCoding, maxBytes: number, budget?: DecodeBudget | null): Promise<Decoded> {
  const decoding = decodingFor(coding, body, maxBytes);
  if (!('open' in decoding)) return decoding;
  const b = budget ?? null;
  const r = await undo(coding, decoding, body, maxBytes, b);
  if (!Buffer.isBuffer(r)) return r;
  return { ok: true, body: r, held: b === null ? 0 : r.length };
}

function tooLarge(maxBytes: number): Decoded {
  return { ok: false, problem: 'too_large', reason: `decoded body exceeds ${maxBytes} bytes` };
}
