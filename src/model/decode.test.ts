import { zstdCompressSync } from '../../test/support/zstd.js';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { BodyBudget } from '../http/body-budget.js';
import { brotliWorkingSet, decodeBody, relayCoding, zstdFrame } from './decode.js';
import type { Decoded } from './decode.js';

const JSON_BODY = Buffer.from(JSON.stringify({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'hi '.repeat(100) }] }));
const MB = 1024 * 1024;

function decodedBody(result: Decoded): Buffer {
  if (!result.ok) throw new Error(`expected success, got ${result.problem}: ${result.reason}`);
  return result.body;
}

function failure(result: Decoded): { problem: string; reason: string } {
  if (result.ok) throw new Error('expected a failure');
  return { problem: result.problem, reason: result.reason };
}

describe('relayCoding: what the relay undoes before reading (new-api DecompressRequestMiddleware)', () => {
  it.each(['gzip', 'br', 'zstd'])('%s, exactly as written', (coding) => {
    expect(relayCoding('POST', coding)).toBe(coding);
    expect(relayCoding('PUT', coding)).toBe(coding);
  });

  it('nothing on GET', () => {
    expect(relayCoding('GET', 'gzip')).toBeNull();
  });

  // Each of these the relay reads as sent: so must sluice, or one body is read two ways.
  it.each([
    undefined,
    '',
    'identity',
    'deflate',
    'x-gzip',
    'GZIP',
    'Gzip',
    'BR',
    'ZSTD',
    'gzip, identity',
    'identity, gzip',
    'gzip,',
    'gzip, gzip',
    'gzip;q=1',
    'gzip\u00a0',
    'compress',
    '*',
  ])('%j: none, the body read as sent', (encoding) => {
    expect(relayCoding('POST', encoding)).toBeNull();
  });
});

describe('decodeBody', () => {
  it.each([
    ['gzip', gzipSync(JSON_BODY)],
    ['br', brotliCompressSync(JSON_BODY)],
  ] as const)('decodes %s', async (coding, compressed) => {
    expect(decodedBody(await decodeBody(compressed, coding, MB))).toEqual(JSON_BODY);
  });

  it('decodes concatenated gzip members completely', async () => {
    const half = JSON_BODY.length >> 1;
    const twoMembers = Buffer.concat([gzipSync(JSON_BODY.subarray(0, half)), gzipSync(JSON_BODY.subarray(half))]);
    expect(decodedBody(await decodeBody(twoMembers, 'gzip', MB))).toEqual(JSON_BODY);
  });

  it('undoes one layer only, as the relay does', async () => {
    const inner = gzipSync(JSON_BODY);
    expect(decodedBody(await decodeBody(gzipSync(inner), 'gzip', MB))).toEqual(inner);
  });
});

/** A zstd frame with a window descriptor (2^windowLog) and one raw block holding `content` (RFC 8878). */
function rawZstdFrame(windowLog: number, content: Buffer): Buffer {
  const block = 1 | (content.length << 3); // last block, raw, its size
  return Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (windowLog - 10) << 3, block & 0xff, (block >> 8) & 0xff, block >> 16]), content]);
}

describe('zstdFrame: the window a frame declares', () => {
  it('reads a window descriptor, and a one-segment frame its content size', () => {
    expect(zstdFrame(rawZstdFrame(27, Buffer.from('abc')))).toEqual({ window: 2 ** 27, oneSegment: false });
    expect(zstdFrame(rawZstdFrame(10, Buffer.from('abc')))).toEqual({ window: 1024, oneSegment: false });
    // One segment, a 4-byte content size of 1 MiB.
    expect(zstdFrame(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00, 0x00, 0x10, 0x00]))).toEqual({ window: MB, oneSegment: true });
    // One segment, a 1-byte content size.
    expect(zstdFrame(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x07]))).toEqual({ window: 7, oneSegment: true });
    expect(zstdFrame(Buffer.from('{"model":"x"}'))).toBeNull();
  });
});

describe.runIf(zstdCompressSync !== undefined)('decodeBody: zstd, where Node has a decoder (the image: Node 26)', () => {
  const zstd = zstdCompressSync!;

  it('decodes a one-shot frame, holding a working set of its own size, far below the 8 MiB cap', async () => {
    const budget = new BodyBudget(MB);
    const lease = budget.lease('client');
    const frame = zstd(JSON_BODY);
    expect(zstdFrame(frame)).toEqual({ window: JSON_BODY.length, oneSegment: true });
    const r = await decodeBody(frame, 'zstd', MB, lease);
    expect(decodedBody(r)).toEqual(JSON_BODY);
    expect(budget.used).toBe(JSON_BODY.length);
  });

  it('stops a bomb at the limit as it decodes, and one that declares its size past it before decoding', async () => {
    const budget = new BodyBudget(64 * MB);
    const lease = budget.lease('client');
    const bomb = zstd(Buffer.alloc(64 * MB));
    expect(bomb.length).toBeLessThan(MB / 4);
    expect(failure(await decodeBody(bomb, 'zstd', MB, lease)).problem).toBe('too_large');
    // One segment declaring 64 MiB of content (then a raw block of 3 bytes): never decoded.
    const declared = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00, 0x00, 0x00, 0x04, 0x19, 0x00, 0x00, 0x61, 0x62, 0x63]);
    expect(zstdFrame(declared)).toEqual({ window: 64 * MB, oneSegment: true });
    expect(failure(await decodeBody(declared, 'zstd', MB, lease))).toEqual({ problem: 'too_large', reason: `decoded body exceeds ${MB} bytes` });
    expect(budget.used).toBe(0);
  });

  it('refuses a frame asking a window past 8 MiB as invalid, and gives everything back', async () => {
    const budget = new BodyBudget(64 * MB);
    const r = failure(await decodeBody(rawZstdFrame(27, Buffer.from('abc')), 'zstd', MB, budget.lease('client')));
    expect(r.problem).toBe('invalid');
    expect(budget.used).toBe(0);
    expect(decodedBody(await decodeBody(rawZstdFrame(23, Buffer.from('abc')), 'zstd', MB))).toEqual(Buffer.from('abc'));
  });

  it('refuses a later frame asking more window than the first (its working set was the first one)', async () => {
    const two = Buffer.concat([rawZstdFrame(10, Buffer.from('a')), rawZstdFrame(20, Buffer.from('b'))]);
    expect(failure(await decodeBody(two, 'zstd', MB)).problem).toBe('invalid');
    const same = Buffer.concat([rawZstdFrame(12, Buffer.from('a')), rawZstdFrame(11, Buffer.from('b'))]);
    expect(decodedBody(await decodeBody(same, 'zstd', MB))).toEqual(Buffer.from('ab'));
  });

  it('is refused while the budget cannot hold its window', async () => {
    const tight = new BodyBudget(2 ** 20).lease('client');
    expect(await decodeBody(rawZstdFrame(21, Buffer.from('abc')), 'zstd', MB, tight)).toMatchObject({ ok: false, problem: 'busy' });
  });
});

describe.runIf(zstdCompressSync === undefined)('decodeBody: zstd without a decoder (Node 20)', () => {
  it('refuses it: unsupported_encoding, a 415', async () => {
    expect(failure(await decodeBody(JSON_BODY, 'zstd', MB))).toEqual({
      problem: 'unsupported_encoding',
      reason: 'unsupported content-encoding "zstd" (this Node has no zstd decoder)',
    });
  });
});

describe('decodeBody: size limit', () => {
  const zeros = Buffer.alloc(64 * MB);
  const gzipBomb = gzipSync(zeros, { level: 9 });
  const brBomb = brotliCompressSync(zeros, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } });

  it('has small bombs to test with', async () => {
    expect(gzipBomb.length).toBeLessThan(MB / 4);
    expect(brBomb.length).toBeLessThan(MB / 4);
  });

  it.each([
    ['gzip', gzipBomb],
    ['br', brBomb],
  ] as const)('refuses 64 MB of zeros behind %s with a 1 MB limit', async (encoding, bomb) => {
    const result = failure(await decodeBody(bomb, encoding, MB));
    expect(result.problem).toBe('too_large');
    expect(result.reason).toMatch(/decoded body exceeds/);
  });

  it('allows a decoded body of exactly maxBytes, not one more', async () => {
    const compressed = gzipSync(JSON_BODY);
    expect(decodedBody(await decodeBody(compressed, 'gzip', JSON_BODY.length))).toEqual(JSON_BODY);
    expect(failure(await decodeBody(compressed, 'gzip', JSON_BODY.length - 1)).problem).toBe('too_large');
    expect(failure(await decodeBody(brotliCompressSync(JSON_BODY), 'br', JSON_BODY.length - 1)).problem).toBe('too_large');
  });

  it('handles a limit of zero without throwing', async () => {
    expect(failure(await decodeBody(gzipSync(JSON_BODY), 'gzip', 0)).problem).toBe('too_large');
    expect(decodedBody(await decodeBody(gzipSync(Buffer.alloc(0)), 'gzip', 0)).length).toBe(0);
  });
});

describe('decodeBody: corrupt data', () => {
  it.each(['gzip', 'br'] as const)('refuses garbage declared as %s', async (encoding) => {
    const result = failure(await decodeBody(Buffer.from('{"model":"not compressed at all"}'), encoding, MB));
    expect(result.problem).toBe('invalid');
    expect(result.reason).toContain(encoding);
  });

  it.each([
    ['gzip', gzipSync(JSON_BODY)],
    ['br', brotliCompressSync(JSON_BODY)],
  ] as const)('refuses truncated %s', async (encoding, compressed) => {
    expect(failure(await decodeBody(compressed.subarray(0, compressed.length >> 1), encoding, MB)).problem).toBe('invalid');
  });

  it('refuses an empty body declared as gzip', async () => {
    expect(failure(await decodeBody(Buffer.alloc(0), 'gzip', MB)).problem).toBe('invalid');
  });

  it('refuses gzip with a corrupted checksum', async () => {
    const compressed = Buffer.from(gzipSync(JSON_BODY));
    compressed[compressed.length - 5]! ^= 0xff;
    expect(failure(await decodeBody(compressed, 'gzip', MB)).problem).toBe('invalid');
  });
});

describe('decodeBody: the bodies budget', () => {
  it("counts the decoded bytes it keeps (held) and gives back the decoder's own", async () => {
    const budget = new BodyBudget(64 * MB);
    const lease = budget.lease('client');
    const r = await decodeBody(brotliCompressSync(JSON_BODY), 'br', MB, lease);
    if (!r.ok) throw new Error(r.reason);
    expect(r.body).toEqual(JSON_BODY);
    expect(r.held).toBe(JSON_BODY.length);
    expect(budget.used).toBe(JSON_BODY.length);
    lease.give(r.held);
    expect(budget.used).toBe(0);
  });

  it('stops a bomb when the budget runs out, with 503, and holds nothing afterwards', async () => {
    const budget = new BodyBudget(2 * MB);
    const lease = budget.lease('client');
    const bomb = gzipSync(Buffer.alloc(64 * MB), { level: 9 });
    const r = await decodeBody(bomb, 'gzip', 32 * MB, lease);
    expect(r).toMatchObject({ ok: false, problem: 'busy' });
    expect(budget.used).toBe(0);
  });

  it('gives everything back when the size limit or bad data ends the decoding', async () => {
    const budget = new BodyBudget(64 * MB);
    const lease = budget.lease('client');
    expect(await decodeBody(gzipSync(Buffer.alloc(4 * MB)), 'gzip', MB, lease)).toMatchObject({ ok: false, problem: 'too_large' });
    expect(await decodeBody(Buffer.from('not gzip at all'), 'gzip', MB, lease)).toMatchObject({ ok: false, problem: 'invalid' });
    expect(budget.used).toBe(0);
  });

  it("takes a brotli decoder's window, read from the stream's header, before decoding", async () => {
    for (const lgwin of [10, 16, 18, 22, 24]) {
      const compressed = brotliCompressSync(Buffer.alloc(4 * MB, 0x20), { params: { [constants.BROTLI_PARAM_LGWIN]: lgwin } });
      const ws = brotliWorkingSet(compressed);
      // The encoder may declare a window smaller than asked for a small input, never larger.
      expect(ws, `lgwin ${lgwin}`).toBeLessThanOrEqual(2 ** Math.max(lgwin, 16) + 4 * MB);
      expect(ws).toBeGreaterThan(2 ** 10);
      // Not enough room for that window: refused before decoding anything.
      const tight = new BodyBudget(ws - 1).lease('client');
      expect(await decodeBody(compressed, 'br', 8 * MB, tight)).toMatchObject({ ok: false, problem: 'busy' });
    }
    const big = brotliCompressSync(Buffer.alloc(32 * MB), { params: { [constants.BROTLI_PARAM_LGWIN]: 24, [constants.BROTLI_PARAM_QUALITY]: 4 } });
    expect(brotliWorkingSet(big)).toBeGreaterThanOrEqual(16 * MB);
  });
});
