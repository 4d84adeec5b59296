import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { readBody, type ChunkObserver } from './body.js';
import { nextTurn } from '../../test/support/time.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A request whose body arrives in the given chunks, one per read. */
function fakeRequest(chunks: Buffer[], headers: Record<string, string> = {}): IncomingMessage {
  const r = new Readable({ read() {} }) as unknown as IncomingMessage & { complete: boolean };
  r.headers = headers;
  r.complete = true;
  for (const c of chunks) r.push(c);
  r.push(null);
  return r;
}

function split(buf: Buffer, sizes: () => number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; ) {
    const n = Math.max(1, sizes());
    out.push(buf.subarray(i, i + n));
    i += n;
  }
  return out;
}

async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await nextTurn();
    gc();
  }
}

describe('readBody', () => {
  it('returns the bytes as sent, joined across chunks', async () => {
    const r = await readBody(fakeRequest([Buffer.from('{"model":'), Buffer.from('"x"}')]), 1000);
    expect(r.ok && r.body.toString()).toBe('{"model":"x"}');
  });

  it('refuses a body over the limit, declared or streamed', async () => {
    expect(await readBody(fakeRequest([], { 'content-length': '11' }), 10)).toEqual({ ok: false, reason: 'too_large' });
    expect(await readBody(fakeRequest([Buffer.alloc(6), Buffer.alloc(6)]), 10)).toEqual({ ok: false, reason: 'too_large' });
  });

  it('reassembles large declared bodies exactly, however they are split (moved into one buffer half-way)', async () => {
    const body = randomBytes(1_000_003);
    let seed = 7;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 70_000) + 1;
    const splits: Array<[string, Buffer[]]> = [
      ['one chunk', [body]],
      ['64 KB chunks', split(body, () => 65_536)],
      ['random chunks', split(body, random)],
      ['a huge first chunk', [body.subarray(0, 900_000), ...split(body.subarray(900_000), () => 1000)]],
    ];
    for (const [name, chunks] of splits) {
      const r = await readBody(fakeRequest(chunks, { 'content-length': String(body.length) }), 2_000_000);
      expect(r.ok && r.body.equals(body), name).toBe(true);
    }
    // More bytes than declared cannot come from Node's parser, but must not be lost either.
    const r = await readBody(
      fakeRequest(
        split(body, () => 65_536),
        { 'content-length': '600000' },
      ),
      2_000_000,
    );
    expect(r.ok && r.body.equals(body)).toBe(true);
  });

  it('reports a request whose client left before the read began as aborted, not pending forever', async () => {
    const req = new Readable({ read() {} }) as unknown as IncomingMessage;
    req.headers = { 'content-length': '10' };
    (req as unknown as Readable).destroy();
    await nextTurn(); // its 'close' is over
    expect(await readBody(req, 100)).toEqual({ ok: false, reason: 'client_aborted' });
  });

  it('does not reserve the declared length before the bytes arrive', async () => {
    const declared = 32 * 1024 * 1024;
    const req = new Readable({ read() {} }) as unknown as IncomingMessage;
    req.headers = { 'content-length': String(declared) };
    gc();
    const before = process.memoryUsage().arrayBuffers;
    const pending = readBody(req, declared);
    (req as unknown as Readable).push(Buffer.alloc(300 * 1024, 1));
    await nextTurn();
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(4 * 1024 * 1024);
    (req as unknown as Readable).destroy();
    expect(await pending).toEqual({ ok: false, reason: 'client_aborted' });
  });

  it('lets go of the body and of its observer once read (a stream holds its request for minutes)', async () => {
    // (The chunks are made inside each case: a test holding the single chunk would hold the body.)
    for (const [name, makeRequest] of [
      ['one chunk, no declared length', () => fakeRequest([Buffer.alloc(128 * 1024, 1)])],
      [
        'declared and moved into one buffer',
        () =>
          fakeRequest(
            split(Buffer.alloc(1024 * 1024, 2), () => 65_536),
            { 'content-length': String(1024 * 1024) },
          ),
      ],
    ] as Array<[string, () => IncomingMessage]>) {
      const req = makeRequest();
      let bodyRef: WeakRef<Buffer> | undefined;
      let observerRef: WeakRef<ChunkObserver> | undefined;
      await (async () => {
        const observer: ChunkObserver = { feed: () => {} };
        observerRef = new WeakRef(observer);
        const r = await readBody(req, 1 << 21, observer);
        if (!r.ok) throw new Error('read failed');
        bodyRef = new WeakRef(r.body);
      })();
      await collectGarbage();
      expect(bodyRef!.deref(), name).toBeUndefined();
      expect(observerRef!.deref(), name).toBeUndefined();
      expect(req.readableEnded, name).toBe(true); // the request itself is still here
    }
  });
});
