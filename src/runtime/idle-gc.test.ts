import { describe, expect, it } from 'vitest';
import { IdleCollector, MIN_HEAP_BYTES } from './idle-gc.js';

const MB = 1024 * 1024;

function collector(minRequests = 1000, idleMs = 30_000) {
  let served = 0;
  let open = 0;
  let collections = 0;
  let heap = 200 * MB;
  const c = new IdleCollector({ served: () => served, inflight: () => open, collect: () => collections++, heapBytes: () => heap, minRequests, idleMs });
  return {
    c,
    /** A check every 5 s from `from` to `to`, both included. */
    ticks: (from: number, to: number) => {
      for (let now = from; now <= to; now += 5_000) c.tick(now);
    },
    /** A check at each `now` in turn, each followed by the collections counted so far. */
    expectAfter: (...steps: Array<[now: number, collections: number]>) => {
      for (const [now, n] of steps) {
        c.tick(now);
        expect(collections).toBe(n);
      }
    },
    serve: (n: number) => (served += n),
    setOpen: (n: number) => (open = n),
    setHeap: (bytes: number) => (heap = bytes),
    get collections() {
      return collections;
    },
  };
}

describe('IdleCollector', () => {
  it('never collects in a process that has not served enough requests, however long it idles', () => {
    const t = collector();
    t.ticks(0, 600_000);
    expect(t.collections).toBe(0);
    t.serve(999);
    t.ticks(605_000, 1_200_000);
    expect(t.collections).toBe(0);
  });

  it('collects once after enough requests and a quiet spell, and not again until traffic returns', () => {
    const t = collector();
    t.serve(5_000);
    t.expectAfter([0, 0], [25_000, 0]); // traffic seen at 0: quiet from then on
    expect(t.c.tick(30_000)).toBe(true);
    t.ticks(35_000, 300_000);
    expect(t.collections).toBe(1);
    t.serve(10);
    t.expectAfter([305_000, 1], [330_000, 1], [335_000, 2]);
  });

  it('never collects while a request is in flight (an open stream counts as served only when it ends)', () => {
    const t = collector();
    t.serve(5_000);
    t.setOpen(3);
    t.ticks(0, 300_000);
    expect(t.collections).toBe(0);
    // The quiet spell starts at the last check that saw a request open (300 s).
    t.setOpen(0);
    t.expectAfter([305_000, 0], [325_000, 0], [330_000, 1]);
  });

  it('keeps a small heap warm for the next traffic, and gives a large one back', () => {
    const t = collector();
    t.serve(5_000);
    t.setHeap(MIN_HEAP_BYTES - 1);
    t.ticks(0, 300_000);
    expect(t.collections).toBe(0);
    // What a burst of streams took: collected at the next check of the same quiet spell.
    t.setHeap(MIN_HEAP_BYTES + 64 * MB);
    t.expectAfter([305_000, 1], [310_000, 1]);
  });

  it('waits while requests keep arriving', () => {
    const t = collector(1000, 30_000);
    t.serve(2_000);
    for (let now = 0; now <= 300_000; now += 5_000) {
      t.serve(1);
      t.c.tick(now);
    }
    expect(t.collections).toBe(0);
  });
});
