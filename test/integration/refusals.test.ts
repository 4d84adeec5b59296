import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ManualClock } from '../support/clock.js';
import { DEFAULTS } from '../../src/config/index.js';
import { FreeTierLimiter } from '../../src/limits/free-tier.js';
import { IpLimiter } from '../../src/limits/ip.js';
import { RedisStore } from '../../src/store/redis/index.js';
import { CountingStore } from '../support/counting-store.js';
import { uniquePrefix } from '../support/redis.js';

/** A verdict as the store gives it: without the mark of one answered from memory. */
function unmarked<V extends object>(v: V): Omit<V, 'remembered'> {
  const { remembered: _, ...rest } = v as V & { remembered?: true };
  return rest;
}

/**
 * Remembered refusals against the Lua script: a limiter that answers refused users' retries from
 * memory must give, call for call, the verdicts of one that asks Redis every time.
 */
describe('refusals remembered in front of Redis', () => {
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    for (const p of [uniquePrefix('memo-a'), uniquePrefix('memo-b')]) {
      const s = new RedisStore({ url: inject('redisUrl'), keyPrefix: p, commandTimeoutMs: 2000 });
      await s.waitReady();
      stores.push(s);
    }
  });
  afterAll(() => Promise.all(stores.map((s) => s.close())));

  it('give the same verdicts as asking Redis every time, across window edges and days, with fewer decisions', async () => {
    let seed = 11;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const clock = new ManualClock(Date.UTC(2026, 2, 10, 15, 0, 0)); // 23:00 in Beijing
    const c = { ...DEFAULTS.freeTier, perMinute: 3, windowSeconds: 10, perDay: 25 };
    const counted = new CountingStore(stores[0]!);
    const a = new FreeTierLimiter(c, counted, clock, { rememberRefusalsMs: 86_400_000 });
    const b = new FreeTierLimiter(c, stores[1]!, clock, { rememberRefusalsMs: 0 });
    let refused = 0;
    const steps = 1500;
    for (let i = 0; i < steps; i++) {
      const r = rand();
      // Whole quarter-seconds, so that calls often land exactly where a window call leaves.
      clock.advance(r < 0.7 ? Math.floor(rand() * 4) * 250 : r < 0.997 ? Math.floor(rand() * 32) * 250 : 20 * 3_600_000);
      const user = rand() < 0.75 ? 'u1' : 'u2';
      const va = await a.admit(user);
      expect(unmarked(va), `step ${i}`).toEqual(await b.admit(user));
      if (!va.admitted) refused++;
    }
    expect(refused).toBeGreaterThan(300);
    expect(counted.asked).toBeLessThan(steps - refused / 2);
  });

  it('per-IP refusals give the same verdicts as asking Redis every time, also after the limit is lowered', async () => {
    let seed = 5;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const rule = (limit: number) => ({ name: 'q', paths: ['/api/log/token'], limit, windowSeconds: 15, shadow: false });
    let limit = 5;
    const pair = (): [IpLimiter, IpLimiter] => [
      new IpLimiter([rule(limit)], stores[0]!, clock, { rememberRefusalsMs: 86_400_000 }),
      new IpLimiter([rule(limit)], stores[1]!, clock, { rememberRefusalsMs: 0 }),
    ];
    let [a, b] = pair();
    for (let i = 0; i < 1200; i++) {
      if (i === 600) {
        limit = 2; // a reload: more calls in the window than the new limit
        [a, b] = pair();
      }
      const r = rand();
      clock.advance(r < 0.7 ? Math.floor(rand() * 4) * 250 : Math.floor(rand() * 24) * 250);
      const addr = rand() < 0.7 ? '198.51.100.7' : '198.51.100.8';
      expect(unmarked(await a.admit(rule(limit), addr)), `step ${i}`).toEqual(await b.admit(rule(limit), addr));
    }
  });
});
