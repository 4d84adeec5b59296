import { describe, expect, it } from 'vitest';
import { IdleCollector } from './idle-gc.js';

function collector(minRequests = 1000, idleMs = 30_000) {
  let served = 0;
  let open = 0;
  let collections = 0;
  const c = new IdleCollector({ served: () => served, inflight: () => open, collect: () => collections++, minRequests, idleMs });
  return {
    c,
    /** A check every 5 s from `from` to `to`, both included. */
    ticks: (from: number, to: number) => {
      for (let now = from; now <= to; now += 5_000) c.tick(now);
    },
    serve: (n: number) => (served += n),
    setOpen: (n: number) => (open = n),
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
    t.c.tick(0); // traffic seen: quiet from now on
    t.c.tick(25_000);
    expect(t.collections).toBe(0);
    expect(t.c.tick(30_000)).toBe(true);
    t.ticks(35_000, 300_000);
    expect(t.collections).toBe(1);
    t.serve(10);
    t.c.tick(305_000);
    t.c.tick(330_000);
    expect(t.collections).toBe(1);
    t.c.tick(335_000);
    expect(t.collections).toBe(2);
  });

  it('never collects while a request is in flight (an open stream counts as served only when it ends)', () => {
    const t = collector();
    t.serve(5_000);
    t.setOpen(3);
    t.ticks(0, 300_000);
    expect(t.collections).toBe(0);
    // The quiet spell starts at the last check that saw a request open (300 s).
    t.setOpen(0);
    t.c.tick(305_000);
    t.c.tick(325_000);
    expect(t.collections).toBe(0);
    t.c.tick(330_000);
    expect(t.collections).toBe(1);
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
