import { describe, expect, it } from 'vitest';
import { ModelPrepass } from './prepass.js';
import { scanModel } from './scan.js';

/** A small deterministic generator, so a failure names a seed that reproduces it. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const PIECES = ['a', ' ', '"', '\\', '\\\\', '\\"', '{', '}', '[', ']', 'model', 'ü', '😀', '\\u0022', ','];

function randomString(r: () => number): string {
  let s = '';
  const n = Math.floor(r() * 12);
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(r() * PIECES.length)];
  return s;
}

function randomValue(r: () => number, depth: number): unknown {
  const k = r();
  if (depth > 5 || k < 0.3) return randomString(r);
  if (k < 0.4) return Math.floor(r() * 1000) - 500;
  if (k < 0.45) return [true, false, null][Math.floor(r() * 3)];
  if (k < 0.7) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 4); i > 0; i--) o[randomString(r)] = randomValue(r, depth + 1);
  return o;
}

/**
 * The reference: a plain byte-by-byte walk (one escape flag, one bracket counter) giving, for
 * every string and container opened directly inside the top-level object, where it ends.
 */
function reference(buf: Buffer): { strings: Map<number, number>; containers: Map<number, number> } {
  const strings = new Map<number, number>();
  const containers = new Map<number, number>();
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === 0x5c) escaped = true;
      else if (c === 0x22) {
        inString = false;
        if (depth === 1) strings.set(start, i);
      }
      continue;
    }
    if (c === 0x22) {
      inString = true;
      if (depth === 1) start = i + 1;
    } else if (c === 0x7b || c === 0x5b) {
      if (depth === 1) start = i;
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 1) containers.set(start, i + 1);
    }
  }
  return { strings, containers };
}

function feedInChunks(buf: Buffer, r: () => number, minLength = 0): ModelPrepass {
  const p = new ModelPrepass(minLength);
  for (let i = 0; i < buf.length; ) {
    const n = 1 + Math.floor(r() * 40);
    p.feed(buf.subarray(i, i + n));
    i += n;
  }
  return p;
}

describe('ModelPrepass', () => {
  it('records exactly where every top-level string and nested container ends, however the body is split', () => {
    let recorded = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const r = rng(seed);
      const doc: Record<string, unknown> = {};
      for (let i = 1 + Math.floor(r() * 5); i > 0; i--) doc[randomString(r)] = randomValue(r, 1);
      if (r() < 0.5) doc.model = randomString(r);
      const buf = Buffer.from(JSON.stringify(doc, null, r() < 0.3 ? 1 : undefined));
      const ref = reference(buf);
      const p = feedInChunks(buf, r);
      for (const [start, end] of ref.strings) expect(p.stringEnd(start), `seed ${seed}, string at ${start}`).toBe(end);
      for (const [start, end] of ref.containers) expect(p.containerEnd(start), `seed ${seed}, container at ${start}`).toBe(end);
      expect(scanModel(buf, p), `seed ${seed}`).toEqual(scanModel(buf));
      recorded += ref.strings.size + ref.containers.size;
    }
    expect(recorded).toBeGreaterThan(1000);
  });

  it('records nothing below its minimum length', () => {
    const buf = Buffer.from(JSON.stringify({ a: 'x'.repeat(10), b: ['y'.repeat(300)], model: 'm' }));
    const p = new ModelPrepass(256);
    p.feed(buf);
    expect(p.stringEnd(buf.indexOf('x'))).toBeUndefined();
    const arrayAt = buf.indexOf('[');
    expect(p.containerEnd(arrayAt)).toBe(buf.indexOf(']') + 1);
  });

  it('stops recording at mismatched brackets, leaving the fault for the final scan to report', () => {
    const buf = Buffer.from('{"a":[1,2},"b":{"c":[]},"model":"m"}');
    const p = new ModelPrepass(0);
    p.feed(buf);
    expect(p.containerEnd(buf.indexOf('{"c"'))).toBeUndefined();
    expect(scanModel(buf, p)).toEqual(scanModel(buf));
    expect(scanModel(buf, p).kind).toBe('invalid');
  });

  it('records nothing for a body that is not an object', () => {
    const buf = Buffer.from('[{"model":"m"}, "' + 'x'.repeat(300) + '"]');
    const p = new ModelPrepass(0);
    p.feed(buf);
    expect(p.containerEnd(1)).toBeUndefined();
    expect(p.stringEnd(buf.indexOf('xxx'))).toBeUndefined();
  });

  it('carries an escape across a chunk boundary', () => {
    const body = '{"a":"x\\\\\\"' + 'y'.repeat(40) + '","model":"m"}'; // x \\ \" y...: the string goes on after \"
    const buf = Buffer.from(body);
    for (let cut = 1; cut < buf.length; cut++) {
      const p = new ModelPrepass(0);
      p.feed(buf.subarray(0, cut));
      p.feed(buf.subarray(cut));
      expect(p.stringEnd(6), `cut at ${cut}`).toBe(buf.indexOf('",'));
    }
  });
});
