import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../support/redis.js';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/index.js';
import { DAY_KEY_GRACE_MS, type LimitCheck, type Store } from '../../src/store/types.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

/**
 * The same calls against both stores, which must answer alike. Times are the sidecar's
 * (passed in), starting from the real clock so that the Redis keys' own expiry (real time,
 * 27 h past the day) is far away.
 */
describe.each(['memory', 'redis'] as const)('%s store: day counters and limit figures', (kind) => {
  let store: Store;
  let n = 0;
  /** A key no other test uses. */
  const key = (name: string): string => `${name}:${++n}`;

  beforeAll(async () => {
    if (kind === 'memory') store = new MemoryStore();
    else {
      const redis = new RedisStore({ url: inject('redisUrl'), keyPrefix: uniquePrefix(import.meta.url), commandTimeoutMs: 2000 });
      await redis.waitReady();
      store = redis;
    }
  });
  afterAll(() => store.close());

  it('a day count outlives its first reset: a later reset for the same day (another zone) still sees it', async () => {
    const now = Date.now();
    const resetAt = now + 10 * MIN;
    const day = key('day');
    const check = (resetAtMs: number): LimitCheck[] => [{ kind: 'counter', key: day, limit: 2, resetAtMs }];
    expect((await store.consume(check(resetAt), now, 'a')).admitted).toBe(true);
    expect((await store.consume(check(resetAt), now + 1, 'b')).admitted).toBe(true);
    // After a reload to a zone whose "same" day ends 25 h later, an hour past the old reset.
    const later = resetAt + HOUR;
    const d = await store.consume(check(resetAt + 25 * HOUR), later, 'c');
    expect(d).toEqual({ admitted: false, rejectedBy: 0, retryAfterMs: 24 * HOUR, used: [2], resetMs: [24 * HOUR] });
    expect(await store.inspect(check(resetAt + 25 * HOUR), later)).toEqual([{ used: 2, retryAfterMs: 24 * HOUR, resetMs: 24 * HOUR }]);
    // The figures come from the reset the call passes, even one already past (the key names the day).
    expect(await store.inspect(check(resetAt), later)).toEqual([{ used: 2, retryAfterMs: -HOUR, resetMs: -HOUR }]);
  });

  it('a rejection by the window reports the empty day counter’s reset; inspect reports 0 for it', async () => {
    const now = Date.now();
    const checks: LimitCheck[] = [
      { kind: 'counter', key: key('day'), limit: 5, resetAtMs: now + HOUR },
      { kind: 'window', key: key('win'), limit: 2, windowMs: MIN },
    ];
    const windowOnly = [checks[1]!];
    await store.consume(windowOnly, now, 'a');
    await store.consume(windowOnly, now + 10_000, 'b');
    expect(await store.consume(checks, now + 20_000, 'c')).toEqual({
      admitted: false,
      rejectedBy: 1,
      retryAfterMs: 40_000,
      used: [0, 2],
      resetMs: [HOUR - 20_000, 40_000],
    });
    expect(await store.inspect(checks, now + 20_000)).toEqual([
      { used: 0, retryAfterMs: 0, resetMs: 0 },
      { used: 2, retryAfterMs: 40_000, resetMs: 40_000 },
    ]);
    // The first call has left (a call at exactly now - window has left): one more fits.
    expect(await store.consume(checks, now + MIN, 'd')).toEqual({ admitted: true, used: [1, 2], resetMs: [HOUR - MIN, 10_000] });
    expect(await store.inspect(checks, now + MIN)).toEqual([
      { used: 1, retryAfterMs: 0, resetMs: HOUR - MIN },
      { used: 2, retryAfterMs: 10_000, resetMs: 10_000 },
    ]);
  });

  it('a full window waits for the call that must leave before one more fits', async () => {
    const now = Date.now();
    const checks: LimitCheck[] = [{ kind: 'window', key: key('win'), limit: 2, windowMs: MIN }];
    for (const [i, at] of [0, 5_000, 10_000].entries()) await store.consume(checks, now + at, `m${i}`);
    // Calls at 0 and 5 s admitted, 10 s rejected; at 20 s the one at 0 must leave for one more.
    expect(await store.consume(checks, now + 20_000, 'x')).toEqual({ admitted: false, rejectedBy: 0, retryAfterMs: 40_000, used: [2], resetMs: [40_000] });
  });

  it("an operator's reset deletes the subject's counts it names, and no other", async () => {
    const now = Date.now();
    const subject = `u:${key('reset')}`;
    const named: LimitCheck[] = [
      { kind: 'window', subject, key: 'ft:w', limit: 5, windowMs: MIN },
      { kind: 'counter', subject, key: 'ft:d:today', limit: 5, resetAtMs: now + HOUR },
    ];
    // A count of the subject the reset does not name (a rule a reload since removed).
    const other: LimitCheck[] = [{ kind: 'window', subject, key: 'gone:w', limit: 5, windowMs: MIN }];
    await store.consume(named, now, 'a');
    await store.consume(other, now, 'a');
    await store.resetLimits(subject, named, now);
    expect((await store.inspect(named, now + 1)).map((s) => s.used)).toEqual([0, 0]);
    expect((await store.inspect(other, now + 1)).map((s) => s.used)).toEqual([1]);
  });
});

describe('memory store: when day counters go', () => {
  const counters = (s: MemoryStore): Map<string, unknown> => (s as unknown as { counters: Map<string, unknown> }).counters;

  it(`a count lasts until ${DAY_KEY_GRACE_MS / HOUR} h past the reset it was made with; reads do not drop it, the sweep does`, async () => {
    const s = new MemoryStore();
    const now = 1_000_000_000_000;
    const resetAt = now + HOUR;
    const check = (resetAtMs: number): LimitCheck[] => [{ kind: 'counter', key: 'd', limit: 1, resetAtMs }];
    expect((await s.consume(check(resetAt), now, 'a')).admitted).toBe(true);
    const gone = resetAt + DAY_KEY_GRACE_MS;
    expect(await s.consume(check(resetAt + 26 * HOUR), gone - 1, 'b')).toMatchObject({ admitted: false, used: [1] });
    expect(await s.inspect(check(resetAt + 26 * HOUR), gone)).toEqual([{ used: 0, retryAfterMs: 0, resetMs: 0 }]);
    expect(counters(s).has('d')).toBe(true); // read as gone, but only the sweep forgets it
    const resetAt2 = gone + HOUR;
    expect(await s.consume(check(resetAt2), gone, 'c')).toMatchObject({ admitted: true, used: [1] });
    // Counted afresh, lasting until the grace past the reset that call passed.
    const later = resetAt2 + DAY_KEY_GRACE_MS;
    const past = -(DAY_KEY_GRACE_MS - 1); // figures from the call's reset, long past
    expect(await s.inspect(check(resetAt2), later - 1)).toEqual([{ used: 1, retryAfterMs: past, resetMs: past }]);
    await s.consume([{ kind: 'window', key: 'w', limit: 1, windowMs: MIN }], later, 'e');
    expect(counters(s).has('d')).toBe(false);
  });

  it('a counter made after its reset (a late call) still lasts the grace past that call', async () => {
    const s = new MemoryStore();
    const now = 1_000_000_000_000;
    const check: LimitCheck[] = [{ kind: 'counter', key: 'd', limit: 1, resetAtMs: now - HOUR }];
    await s.consume(check, now, 'a');
    expect((await s.inspect(check, now + DAY_KEY_GRACE_MS - 1))[0]!.used).toBe(1);
    expect((await s.inspect(check, now + DAY_KEY_GRACE_MS))[0]!.used).toBe(0);
  });
});
