import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../test/support/clock.js';
import type { IpLimitRule } from '../config/index.js';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import type { Store } from '../store/types.js';
import { CountingStore } from '../../test/support/counting-store.js';
import { GuardedLimits } from './guard.js';
import { IpLimiter, type IpVerdict } from './ip.js';

const T0 = Date.UTC(2026, 5, 1);
/** Refusals kept as long as they hold, so that these tests see the rules and not the age cap. */
const LONG = { rememberRefusalsMs: 86_400_000 };
const rule = (limit: number, windowSeconds = 60): IpLimitRule => ({ name: 'q', paths: ['/api/log/token'], limit, windowSeconds, shadow: false });

describe('IpLimiter: refused addresses', () => {
  it("answers a refused address's retries from memory with a Retry-After counting down, and lets it in on time", async () => {
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const ip = new IpLimiter([rule(2)], store, clock, LONG);
    const r = rule(2);
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: true });
    clock.advance(5_000);
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: true });
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: false, retryAfterSeconds: 55 });
    expect(store.asked).toBe(3);
    clock.advance(30_500);
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: false, retryAfterSeconds: 25, remembered: true });
    clock.set(T0 + 59_999);
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: false, retryAfterSeconds: 1, remembered: true });
    expect(store.asked).toBe(3);
    await ip.admit(r, '198.51.100.2');
    expect(store.asked).toBe(4); // another address is asked about
    clock.set(T0 + 60_000);
    expect(await ip.admit(r, '198.51.100.1')).toEqual({ admitted: true });
  });

  it('with the default 10 s memory, still answers the real Retry-After, then asks again', async () => {
    const clock = new ManualClock(T0);
    const store = new CountingStore();
    const ip = new IpLimiter([rule(1)], store, clock);
    await ip.admit(rule(1), '198.51.100.3');
    expect(await ip.admit(rule(1), '198.51.100.3')).toEqual({ admitted: false, retryAfterSeconds: 60 });
    clock.advance(5_000);
    expect(await ip.admit(rule(1), '198.51.100.3')).toEqual({ admitted: false, retryAfterSeconds: 55, remembered: true });
    clock.advance(5_000);
    expect(await ip.admit(rule(1), '198.51.100.3')).toEqual({ admitted: false, retryAfterSeconds: 50 });
    expect(store.asked).toBe(3);
  });

  it('gives the verdicts of asking the store every time over a long random run, a lowered limit included', async () => {
    let seed = 3;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const clock = new ManualClock(T0);
    const remembering = new CountingStore();
    const plain = new CountingStore();
    let limit = 6;
    let a = new IpLimiter([rule(limit, 30)], remembering, clock, LONG);
    let b = new IpLimiter([rule(limit, 30)], plain, clock, { rememberRefusalsMs: 0 });
    let refused = 0;
    for (let i = 0; i < 4000; i++) {
      if (i === 1500 || i === 2500) {
        // A reload builds new limiters over the same counts: more calls in a window than the new limit.
        limit = i === 1500 ? 2 : 4;
        a = new IpLimiter([rule(limit, 30)], remembering, clock, LONG);
        b = new IpLimiter([rule(limit, 30)], plain, clock, { rememberRefusalsMs: 0 });
      }
      const r = rand();
      const ms = r < 0.7 ? Math.floor(rand() * 6) * 250 : Math.floor(rand() * 40) * 250;
      clock.advance(rand() < 0.1 ? ms + 1 : ms);
      const addr = rand() < 0.7 ? '198.51.100.7' : '198.51.100.8';
      const { remembered: _, ...va } = (await a.admit(rule(limit, 30), addr)) as IpVerdict & { remembered?: true };
      expect(va, `step ${i}`).toEqual(await b.admit(rule(limit, 30), addr));
      if (!va.admitted) refused++;
    }
    expect(refused).toBeGreaterThan(1000);
    expect(remembering.asked).toBeLessThan(4000 - refused / 2);
  });

  it('does not keep refusals taken by this replica alone during a store outage', async () => {
    const failing = new MemoryStore() as unknown as Store & { kind: string };
    Object.defineProperty(failing, 'kind', { value: 'redis' });
    failing.consume = () => Promise.reject(new Error('command timed out'));
    const ip = new IpLimiter([rule(1)], new GuardedLimits(failing, new Metrics({ processMetrics: false }), () => 'open'), new ManualClock(T0));
    await ip.admit(rule(1), '198.51.100.9');
    expect((await ip.admit(rule(1), '198.51.100.9')).admitted).toBe(false);
    expect(await ip.admit(rule(1), '198.51.100.9')).not.toHaveProperty('remembered'); // asked again
  });
});
