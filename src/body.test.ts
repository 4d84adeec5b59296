import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { readBody } from './body.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function fakeRequest(chunks: Buffer[], headers: Record<string, string> = {}): IncomingMessage {
  const r = new Readable({ read() {} }) as unknown as IncomingMessage & { complete: boolean };
  for (const c of chunks) r.push(c);
  r.push(null);
  r.headers = headers;
  r.complete = true;
  return r;
}

describe('readBody', () => {
  it('returns the bytes as sent, joined across chunks', async () => {
    const r = await readBody(fakeRequest([Buffer.from('{"model":'), Buffer.from('"x"}')]), 1000);
    expect(r.ok && r.body.toString()).toBe('{"model":"x"}');
  });

  it('refuses a body over the limit, declared or streamed', async () => {
    expect(await readBody(fakeRequest([], { 'content-length': '11' }), 10)).toEqual({ ok: false, reason: 'too-large' });
    expect(await readBody(fakeRequest([Buffer.alloc(6), Buffer.alloc(6)]), 10)).toEqual({ ok: false, reason: 'too-large' });
  });

  it('does not keep the body alive through the request once read (a stream holds its request for minutes)', async () => {
    const req = fakeRequest([Buffer.alloc(128 * 1024, 1)]);
    let ref: WeakRef<Buffer> | undefined;
    await (async () => {
      const r = await readBody(req, 1 << 20);
      if (!r.ok) throw new Error('read failed');
      ref = new WeakRef(r.body);
    })();
    for (let i = 0; i < 5 && ref!.deref() !== undefined; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    expect(ref!.deref()).toBeUndefined();
    expect(req.listenerCount('data')).toBe(1); // the request, and the listener closures on it, are still alive here
  });
});
