/**
 * Decodes a request body for inspection only, exactly where the relay decodes it; the original
 * bytes are forwarded untouched.
 */
import { createBrotliDecompress, createGunzip, type BrotliDecompress, type Gunzip } from 'node:zlib';
import { fieldLines } from '../http/fields.js';

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
 * A Content-Encoding sent more than once is refused before this (the relay reads only the first).
 */
export function relayCoding(method: string, contentEncoding: string | undefined): RelayCoding | null {
  if (method === 'GET') return null;
  return contentEncoding === 'gzip' || contentEncoding === 'br' || contentEncoding === 'zstd' ? contentEncoding : null;
}

/**
 * Content-Encoding sent on more than one line: Node joins them (`gzip, gzip` reads as a list the
 * relay leaves raw), while the relay undoes the first line's coding alone. Read two ways, the
 * request is refused (400).
 */
export function repeatedContentEncoding(contentEncoding: string | undefined, rawHeaders: readonly string[]): boolean {
  return contentEncoding?.includes(',') === true && fieldLines(rawHeaders, 'content-encoding') > 1;
}

type Decoder = Gunzip | BrotliDecompress;

/** Output slices per thread-pool round trip: fewer trips than zlib's 16 KB default. */
const CHUNK = 64 * 1024;

/**
 * Decoders are zlib streams running in its thread pool (inflating megabytes on the event loop
 * would hold every other request), and their output is counted as it comes out: a bomb stops
 * at the limit, or when the bodies' budget cannot take more, without ever being held whole.
 * zstd, which the relay undoes too, has no decoder in Node 20: such a body is refused (415).
 */
const DECODERS = new Map<RelayCoding, () => Decoder>([
  ['gzip', () => createGunzip({ chunkSize: CHUNK })],
  ['br', () => createBrotliDecompress({ chunkSize: CHUNK })],
]);

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
function undo(coding: RelayCoding, decoder: () => Decoder, input: Buffer, maxBytes: number, budget: DecodeBudget | null): Promise<Buffer | Decoded> {
  const workingSet = coding === 'br' ? brotliWorkingSet(input) : ZLIB_WORKING_SET;
  if (budget !== null && !budget.take(workingSet)) return Promise.resolve(BUSY);
  return new Promise((resolve) => {
    const z = decoder();
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
  const decoder = DECODERS.get(coding);
  if (decoder === undefined) return { ok: false, problem: 'unsupported_encoding', reason: `unsupported content-encoding "${coding}"` };
  const b = budget ?? null;
  const r = await undo(coding, decoder, body, maxBytes, b);
  if (!Buffer.isBuffer(r)) return r;
  return { ok: true, body: r, held: b === null ? 0 : r.length };
}

function tooLarge(maxBytes: number): Decoded {
  return { ok: false, problem: 'too_large', reason: `decoded body exceeds ${maxBytes} bytes` };
}
