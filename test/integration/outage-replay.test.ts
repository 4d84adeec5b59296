/**
 * The replay of calls admitted in memory during an outage, against a real Redis: each is added
 * at its own time, at most once, and only when Redis cannot already have it.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisStore } from '../../src/store/redis/index.js';
import type { LimitCheck, OutageAdmission } from '../../src/store/types.js';
import { freePort, uniquePrefix } from '../support/redis.js';

const MIN = 60_000;

describe('replaying outage admissions into Redis', () => {
  let store: RedisStore;
  const prefix = uniquePrefix('outage-replay');
  beforeAll(async () => {
    store = new RedisStore({ url: inject('redisUrl'), keyPrefix: prefix, commandTimeoutMs: 2000 });
    await store.waitReady();
  });
  afterAll(() => store.close());

  const T = Date.now();
  /** A user's free-tier checks as FreeTierLimiter makes them: the day first, then the window. */
  const checksOf = (user: string, dayEndsAt = T + 3_600_000): LimitCheck[] => [
    { kind: 'counter', subject: `u:${user}`, key: 'ft:d:today', limit: 100, resetAtMs: dayEndsAt },
    { kind: 'window', subject: `u:${user}`, key: 'ft:w', limit: 20, windowMs: MIN },
  ];
  const admission = (user: string, member: string, nowMs: number, maybeCounted: boolean, dayEndsAt?: number): OutageAdmission => ({
    checks: checksOf(user, dayEndsAt),
    nowMs,
    member,
    maybeCounted,
  });
  const used = async (user: string, now = T) => (await store.inspect(checksOf(user), now)).map((s) => s.used);

  it('adds each call at its own time, once: a second replay of the same calls changes nothing', async () => {
    const calls = [admission('a', 'a1', T - 10_000, false), admission('a', 'a2', T - 5_000, true)];
    expect(await store.replayAdmissions(calls, T)).toEqual(['replayed', 'replayed']);
    const [day, win] = await store.inspect(checksOf('a'), T);
    expect([day!.used, win!.used]).toEqual([2, 2]);
    // The oldest call was at T - 10 s: it leaves the window 50 s from now, not 60.
    expect(win!.resetMs).toBe(50_000);
    expect(await used('a', T + 52_000)).toEqual([2, 1]);
    // A retry after an answer that was lost: recognised by member, counted once.
    expect(await store.replayAdmissions(calls, T + 1000)).toEqual(['already_counted', 'already_counted']);
    expect(await used('a')).toEqual([2, 2]);
  });

  it('recognises a call whose own decision ran in Redis after all, and counts one whose decision was refused there', async () => {
    expect((await store.consume(checksOf('b'), T - 3000, 'b1')).admitted).toBe(true);
    expect(await store.replayAdmissions([admission('b', 'b1', T - 3000, true), admission('b', 'b2', T - 2000, true)], T)).toEqual(['already_counted', 'replayed']);
    expect(await used('b')).toEqual([2, 2]);
  });

  it('does not count a call that may have run once its window no longer tells; counts one that was never sent, once', async () => {
    const old = T - MIN - 5000; // its window is over, its day is not
    expect(await store.replayAdmissions([admission('c', 'c1', old, true)], T)).toEqual(['unknown']);
    expect(await used('c')).toEqual([0, 0]);
    expect(await store.replayAdmissions([admission('c', 'c2', old, false)], T)).toEqual(['replayed']);
    expect(await used('c')).toEqual([1, 0]); // the day only: the minute it was in is over
    expect(await store.replayAdmissions([admission('c', 'c2', old, false)], T)).toEqual(['already_counted']);
    expect(await used('c')).toEqual([1, 0]);
  });

  it('lets go of a call whose window and day are both over', async () => {
    expect(await store.replayAdmissions([admission('d', 'd1', T - 2 * MIN, false, T - MIN)], T)).toEqual(['expired']);
    expect(await used('d')).toEqual([0, 0]);
  });

  it('fails only the call whose key holds the wrong type; the others of its run are counted', async () => {
    const admin = new Redis(inject('redisUrl'));
    try {
      await admin.set(`${prefix}{u:e}:ft:w`, 'not a sorted set');
    } finally {
      admin.disconnect();
    }
    expect(await store.replayAdmissions([admission('e', 'e1', T, false), admission('f', 'f1', T, false)], T)).toEqual(['failed', 'replayed']);
    expect(await used('f')).toEqual([1, 1]);
  });

  it('leaves every call to retry when Redis cannot be asked', async () => {
    const away = new RedisStore({ url: `redis://127.0.0.1:${await freePort()}`, keyPrefix: prefix, commandTimeoutMs: 100 });
    try {
      expect(await away.replayAdmissions([admission('g', 'g1', T, false)], T)).toEqual(['retry']);
    } finally {
      await away.close();
    }
  });
});
