import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../test/support/clock.js';
import { DEFAULTS, type FreeTierConfig } from '../config/index.js';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import type { Store } from '../store/types.js';
import { FreeTierLimiter, type FreeTierVerdict } from './free-tier.js';
import { CountingStore } from '../../test/support/counting-store.js';
import { GuardedLimits, type LimitStore } from './guard.js';

const T0 = Date.UTC(2026, 2, 10, 4, 0, 0); // 12:00 in Beijing
const BEIJING_MIDNIGHT = Date.UTC(2026, 2, 10, 16, 0, 0);
/** Refusals kept as long as they hold, so that these tests see the rules and not the age cap. */
const LONG = { rememberRefusalsMs: 86_400_000 };

function config(over: Partial<FreeTierConfig>): FreeTierConfig {
  return { ...DEFAULTS.freeTier, ...over };
}

/** What the store itself says now, from a limiter that remembers nothing (a refusal counts nothing). */
function storeSays(c: FreeTierConfig, store: LimitStore, clock: ManualClock, user: string): Promise<FreeTierVerdict> {
  return new FreeTierLimiter(c, store, clock, { rememberRefusalsMs: 0 }).admit(user);
}

/** The limiter's verdict for `user`, which must come from a kept refusal: without its `remembered` mark, to compare with the store's. */
async function recalled(ft: FreeTierLimiter, user = 'u'): Promise<FreeTierVerdict> {
  const v = await ft.admit(user);
  expect(v).toHaveProperty('remembered', true);
  const { remembered: _, ...rest } = v as FreeTierVerdict & { remembered?: true };
  return rest as FreeTierVerdict;
}

describe('FreeTierLimiter: refused users', () => {
  it("answers a refused user's retries from memory, field for field as the store would, until the oldest call leaves the window", async () => {
    const c = config({ perMinute: 3, perDay: 50 });
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const ft = new FreeTierLimiter(c, store, clock, LONG);
    for (let i = 0; i < 3; i++) {
      expect((await ft.admit('u')).admitted).toBe(true);
      clock.advance(1000); // calls at 0, 1 and 2 s
    }
    const first = await ft.admit('u');
    expect(first).toMatchObject({ admitted: false, reason: 'window', retryAfterSeconds: 57 });
    expect(store.asked).toBe(4);
    for (const at of [3_500, 10_000, 30_001, 59_999]) {
      clock.set(T0 + at);
      expect(await recalled(ft)).toEqual(await storeSays(c, store.inner, clock, 'u')); // no round trip at all
    }
    expect(store.asked).toBe(4);
    clock.set(T0 + 60_000); // the call at 0 s leaves: the store is asked again, and admits
    expect((await ft.admit('u')).admitted).toBe(true);
    expect(store.asked).toBe(5);
  });

  it('asks the store again once a refusal has been remembered for rememberRefusalsMs (10 s by default)', async () => {
    const c = config({ perMinute: 1, perDay: 50 });
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const ft = new FreeTierLimiter(c, store, clock);
    await ft.admit('u');
    expect((await ft.admit('u')).admitted).toBe(false);
    clock.advance(9_999);
    expect(await recalled(ft)).toEqual(await storeSays(c, store.inner, clock, 'u'));
    expect(store.asked).toBe(2);
    clock.advance(1);
    const again = await ft.admit('u');
    expect(again).not.toHaveProperty('remembered'); // asked, though the window still holds the call
    expect(again).toMatchObject({ admitted: false, reason: 'window', retryAfterSeconds: 50 });
    expect(store.asked).toBe(3);
    expect(await new FreeTierLimiter(c, store, clock, { rememberRefusalsMs: 0 }).admit('u')).not.toHaveProperty('remembered');
    expect(store.asked).toBe(4);
  });

  it('keeps a daily refusal until the window empties, then until the day ends, and admits at 00:00', async () => {
    const c = config({ perMinute: 10, perDay: 3 });
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const ft = new FreeTierLimiter(c, store, clock, LONG);
    for (let i = 0; i < 3; i++) expect((await ft.admit('u')).admitted).toBe(true);
    expect(await ft.admit('u')).toMatchObject({ admitted: false, reason: 'day' });
    // The window's count and reset are part of the answer: kept only until its calls leave.
    clock.advance(59_999);
    expect(await recalled(ft)).toEqual(await storeSays(c, store.inner, clock, 'u'));
    expect(store.asked).toBe(4);
    clock.advance(1);
    expect(await ft.admit('u')).toMatchObject({ admitted: false, reason: 'day', windowUsed: 0 });
    expect(store.asked).toBe(5);
    clock.set(BEIJING_MIDNIGHT - 1);
    expect(await recalled(ft)).toEqual(await storeSays(c, store.inner, clock, 'u'));
    expect(store.asked).toBe(5);
    clock.set(BEIJING_MIDNIGHT);
    expect((await ft.admit('u')).admitted).toBe(true);
    expect(store.asked).toBe(6);
  });

  it('lets a window refusal that outlasts the day go at 00:00, when the daily count starts again', async () => {
    const c = config({ perMinute: 2, perDay: 50 });
    const clock = new ManualClock(BEIJING_MIDNIGHT - 30_000);
    const store = new CountingStore();
    const ft = new FreeTierLimiter(c, store, clock, LONG);
    await ft.admit('u');
    await ft.admit('u');
    clock.advance(10_000);
    expect(await ft.admit('u')).toMatchObject({ admitted: false, reason: 'window', dayUsed: 2, retryAfterSeconds: 50 });
    clock.set(BEIJING_MIDNIGHT - 1);
    expect(await recalled(ft)).toEqual(await storeSays(c, store.inner, clock, 'u'));
    clock.set(BEIJING_MIDNIGHT + 1000);
    const next = await ft.admit('u');
    expect(next).toMatchObject({ admitted: false, reason: 'window', dayUsed: 0 });
    expect(next).toEqual(await storeSays(c, store.inner, clock, 'u'));
  });

  it('gives the same verdicts as the store over a long random run, asking it less', async () => {
    // Two limiters on two identical stores, one remembering refusals and one not: every verdict
    // must be equal, across window edges, several days and a 23-hour quiet spell.
    let seed = 7;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const c = config({ perMinute: 4, windowSeconds: 20, perDay: 30 });
    const clock = new ManualClock(T0);
    const remembering = new CountingStore();
    const plain = new CountingStore();
    const a = new FreeTierLimiter(c, remembering, clock, LONG);
    const b = new FreeTierLimiter(c, plain, clock, { rememberRefusalsMs: 0 });
    let refused = 0;
    for (let i = 0; i < 4000; i++) {
      const r = rand();
      // Mostly whole quarter-seconds, so that calls often land exactly where a window call leaves.
      const ms = r < 0.6 ? Math.floor(rand() * 6) * 250 : r < 0.995 ? Math.floor(rand() * 48) * 250 : 23 * 3_600_000;
      clock.advance(rand() < 0.1 ? ms + 1 : ms);
      const user = rand() < 0.8 ? 'u1' : 'u2';
      const { remembered: _, ...va } = (await a.admit(user)) as FreeTierVerdict & { remembered?: true };
      expect(va, `step ${i}`).toEqual(await b.admit(user));
      if (!va.admitted) refused++;
    }
    expect(refused).toBeGreaterThan(1000);
    expect(plain.asked).toBe(4000);
    expect(remembering.asked).toBeLessThan(4000 - refused / 2);
  });

  it('does not keep refusals taken by this replica alone during a store outage', async () => {
    const failing = new MemoryStore() as unknown as Store & { kind: string };
    Object.defineProperty(failing, 'kind', { value: 'redis' });
    failing.consume = () => Promise.reject(new Error('command timed out'));
    const clock = new ManualClock(T0);
    const ft = new FreeTierLimiter(config({ perMinute: 1 }), new GuardedLimits(failing, new Metrics({ processMetrics: false }), () => 'open'), clock);
    expect((await ft.admit('u')).admitted).toBe(true);
    expect((await ft.admit('u')).admitted).toBe(false);
    expect(await ft.admit('u')).not.toHaveProperty('remembered'); // asked again: the shared store may say otherwise
  });

  it('does not keep a window refusal with more calls in the window than the limit (the limit was lowered)', async () => {
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const before = new FreeTierLimiter(config({ perMinute: 5 }), store, clock);
    for (let i = 0; i < 5; i++) {
      expect((await before.admit('u')).admitted).toBe(true);
      clock.advance(1000);
    }
    // After a reload to 3 a minute, older calls leave before the user gets in and change the answer.
    const after = new FreeTierLimiter(config({ perMinute: 3 }), store, clock, LONG);
    expect(await after.admit('u')).toMatchObject({ admitted: false, reason: 'window', windowUsed: 5 });
    expect(await after.admit('u')).not.toHaveProperty('remembered'); // asked again
  });
});
