/**
 * Decodes a request body for inspection only; the original bytes are forwarded untouched.
 * A content-encoding sluice cannot decode is refused rather than passed through, or compressing
 * a body would be enough to skip the free-tier check.
 */
import { createBrotliDecompress, createGunzip, createInflate, createInflateRaw, type BrotliDecompress, type Gunzip, type Inflate, type InflateRaw } from 'node:zlib';

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

type Decoder = Gunzip | Inflate | InflateRaw | BrotliDecompress;

/** Output slices per thread-pool round trip: fewer trips than zlib's 16 KB default. */
const CHUNK = 64 * 1024;

/**
 * Decoders are zlib streams running in its thread pool (inflating megabytes on the event loop
 * would hold every other request), and their output is counted as it comes out: a bomb stops
 * at the limit, or when the bodies' budget cannot take more, without ever being held whole.
 * HTTP's "deflate" is zlib-wrapped (RFC 9110), but some clients send raw deflate; browsers and
 * curl accept both, so it is decided by the zlib header rather than refused when the relay
 * might accept it.
 */
const DECODERS = new Map<string, (input: Buffer) => Decoder>([
  ['gzip', () => createGunzip({ chunkSize: CHUNK })],
  ['x-gzip', () => createGunzip({ chunkSize: CHUNK })],
  ['deflate', (input) => (hasZlibHeader(input) ? createInflate({ chunkSize: CHUNK }) : createInflateRaw({ chunkSize: CHUNK }))],
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
    if (!DECODERS.has(coding)) return { ok: false, problem: 'unsupported_encoding', reason: `unsupported content-encoding "${coding}"` };
  }
  // Codings are listed in the order they were applied, so they are undone last to first.
  return codings.reverse();
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
function undo(coding: string, input: Buffer, maxBytes: number, budget: DecodeBudget | null): Promise<Buffer | Decoded> {
  const workingSet = coding === 'br' ? brotliWorkingSet(input) : ZLIB_WORKING_SET;
  if (budget !== null && !budget.take(workingSet)) return Promise.resolve(BUSY);
  return new Promise((resolve) => {
    const z = DECODERS.get(coding)!(input);
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
 * The body with its content codings undone, at most `maxBytes` of it after each layer. With a
 * budget, the decoded bytes are counted in it (`held` says how many to give back once read).
 */
export async function decodeBody(body: Buffer, contentEncoding: string | undefined, maxBytes: number, budget?: DecodeBudget | null): Promise<Decoded> {
  const codings = codingsToUndo(contentEncoding);
  if (!Array.isArray(codings)) return codings;
  const b = budget ?? null;
  let out = body;
  let held = 0;
  for (const coding of codings) {
    const r = await undo(coding, out, maxBytes, b);
    // The previous layer's output (never the body as received, which its own lease counts) is done with.
    if (b !== null) b.give(held);
    if (!Buffer.isBuffer(r)) return r;
    out = r;
    held = r.length;
  }
  return { ok: true, body: out, held: b === null ? 0 : held };
}

function tooLarge(maxBytes: number): Decoded {
  return { ok: false, problem: 'too_large', reason: `decoded body exceeds ${maxBytes} bytes` };
}

function hasZlibHeader(input: Buffer): boolean {
  const cmf = input[0];
  const flg = input[1];
  if (cmf === undefined || flg === undefined) return false;
  return (cmf & 0x0f) === 8 && ((cmf << 8) | flg) % 31 === 0;
}
