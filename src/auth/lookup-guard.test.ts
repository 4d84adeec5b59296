import { describe, expect, it } from 'vitest';
import { DEFAULTS, type AuthConfig } from '../config/index.js';
import { ManualClock } from '../../test/support/clock.js';
import { LookupGuard, type LookupAdmission } from './lookup-guard.js';
import { nextTurn } from '../../test/support/time.js';

function guard(over: Partial<AuthConfig> = {}) {
  const clock = new ManualClock();
  let settings: AuthConfig = { ...DEFAULTS.auth, ...over };
  const g = new LookupGuard(() => settings, clock);
  return { g, clock, set: (s: Partial<AuthConfig>) => (settings = { ...settings, ...s }) };
}

type Admitted = Extract<LookupAdmission, { admitted: true }>;

function admitted(a: LookupAdmission): Admitted {
  expect(a.admitted).toBe(true);
  return a as Admitted;
}

describe('LookupGuard', () => {
  describe('the per-address budget of failed lookups', () => {
    it('admits `failuresPerAddress` lookups that fail, then refuses that address, and only that one', () => {
      const { g } = guard({ failuresPerAddress: 3, unknownKeyLookupsPerSecond: 0 });
      for (let i = 0; i < 3; i++) admitted(g.admit('10.0.0.1')).settle('invalid');
      expect(g.admit('10.0.0.1')).toEqual({ admitted: false, reason: 'address_budget' });
      admitted(g.admit('10.0.0.2'));
    });

    it('counts lookups in flight, so concurrent requests cannot overshoot it: the next ones wait, and a place given back goes to the oldest', async () => {
      const { g } = guard({ failuresPerAddress: 2, unknownKeyLookupsPerSecond: 0 });
      const first = admitted(g.admit('a'));
      const second = admitted(g.admit('a'));
      const woken: string[] = [];
      for (const name of ['third', 'fourth']) {
        const a = g.admit('a');
        if (a.admitted || a.reason !== 'address_pending') throw new Error(`expected to wait, got ${JSON.stringify(a)}`);
        void a.settled.then(() => woken.push(name));
      }
      admitted(g.admit('b')); // another address has its own budget
      first.settle('invalid'); // a place spent: nothing changes for the waiters while second may give one back
      await nextTurn();
      expect(woken).toEqual([]);
      const fifth = admitted(g.admit('c')); // unrelated
      fifth.settle('valid');
      second.settle('valid'); // its place goes back, and it was the last in flight: everyone is judged again
      await nextTurn();
      expect(woken).toEqual(['third', 'fourth']);
      admitted(g.admit('a')).settle('invalid');
      // Two failures and none in flight: spent.
      expect(g.admit('a')).toEqual({ admitted: false, reason: 'address_budget' });
    });

    it('wakes one waiter per place given back, and all of them once none is left in flight: after failures, for the 401', async () => {
      const { g } = guard({ failuresPerAddress: 2, unknownKeyLookupsPerSecond: 0 });
      const flying = [admitted(g.admit('a')), admitted(g.admit('a'))];
      const woken: number[] = [];
      for (let i = 0; i < 4; i++) {
        const a = g.admit('a');
        if (a.admitted) throw new Error('admitted past the budget');
        if (a.reason === 'address_pending') void a.settled.then(() => woken.push(i));
      }
      flying[0]!.settle('valid');
      await nextTurn();
      expect(woken).toEqual([0]);
      // The woken one takes the place back and fails; so does the other lookup: the budget is spent.
      admitted(g.admit('a')).settle('invalid');
      await nextTurn();
      expect(woken).toEqual([0]);
      flying[1]!.settle('invalid');
      await nextTurn();
      expect(woken).toEqual([0, 1, 2, 3]);
      expect(g.admit('a')).toEqual({ admitted: false, reason: 'address_budget' });
    });

    it('lets at most `unknownKeyLookupBurst` requests wait per replica; past it, 503 with Retry-After', async () => {
      const { g } = guard({ failuresPerAddress: 1, unknownKeyLookupsPerSecond: 0, unknownKeyLookupBurst: 2 });
      const a = admitted(g.admit('a'));
      const b = admitted(g.admit('b'));
      expect(g.admit('a')).toMatchObject({ reason: 'address_pending' });
      expect(g.admit('b')).toMatchObject({ reason: 'address_pending' });
      expect(g.waiting).toBe(2);
      expect(g.admit('a')).toEqual({ admitted: false, reason: 'lookup_queue_full', retryAfterSeconds: 1 });
      a.settle('valid');
      await nextTurn();
      expect(g.waiting).toBe(1);
      expect(g.admit('b')).toMatchObject({ reason: 'address_pending' }); // a's waiter left: room for one
      expect(g.waiting).toBe(2);
      b.settle('invalid');
    });

    it('gets its place back from a lookup that found a valid key or could not be made (an outage), not from one that failed', () => {
      const { g } = guard({ failuresPerAddress: 1, unknownKeyLookupsPerSecond: 0 });
      admitted(g.admit('a')).settle('valid');
      admitted(g.admit('a')).settle('failed');
      const last = admitted(g.admit('a'));
      last.settle('invalid');
      last.settle('valid'); // settled once only
      expect(g.admit('a').admitted).toBe(false);
    });

    it('refills evenly over the window', () => {
      const { g, clock } = guard({ failuresPerAddress: 4, failureWindowSeconds: 60, unknownKeyLookupsPerSecond: 0 });
      for (let i = 0; i < 4; i++) admitted(g.admit('a')).settle('invalid');
      clock.advance(14_999);
      expect(g.admit('a').admitted).toBe(false);
      clock.advance(1);
      admitted(g.admit('a')).settle('invalid');
      expect(g.admit('a').admitted).toBe(false);
      clock.advance(60_000);
      for (let i = 0; i < 4; i++) admitted(g.admit('a')).settle('invalid');
      expect(g.admit('a').admitted).toBe(false);
    });

    it('keeps at most `maxAddresses`, forgetting the one longest untouched, and none whose budget is full', () => {
      const { g } = guard({ failuresPerAddress: 1, maxAddresses: 2, unknownKeyLookupsPerSecond: 0 });
      admitted(g.admit('a')).settle('invalid');
      admitted(g.admit('b')).settle('invalid');
      admitted(g.admit('c')).settle('invalid');
      expect(g.tracked).toBe(2);
      admitted(g.admit('a')); // forgotten: a full budget again
      expect(g.admit('c').admitted).toBe(false);
      admitted(g.admit('d')).settle('valid'); // c, the longest untouched, is forgotten for d
      expect(g.tracked).toBe(1); // a, its lookup in flight; d got its place back: nothing to keep for it
      admitted(g.admit('c'));
    });

    it('takes a reloaded `maxAddresses` at the next lookup: a smaller one forgets the longest untouched, a larger one keeps more', () => {
      const { g, set } = guard({ failuresPerAddress: 1, maxAddresses: 3, unknownKeyLookupsPerSecond: 0 });
      for (const a of ['a', 'b', 'c']) admitted(g.admit(a)).settle('invalid');
      set({ maxAddresses: 2 });
      admitted(g.admit('d')).settle('invalid'); // a and b, the longest untouched, are forgotten
      expect(g.tracked).toBe(2);
      expect(g.admit('c').admitted).toBe(false);
      expect(g.admit('d').admitted).toBe(false);
      admitted(g.admit('b')).settle('invalid'); // a full budget again; c is forgotten for it
      set({ maxAddresses: 4 });
      for (const a of ['e', 'f']) admitted(g.admit(a)).settle('invalid');
      expect(g.tracked).toBe(4);
      for (const a of ['d', 'b', 'e', 'f']) expect(g.admit(a).admitted).toBe(false);
    });

    it('is off at 0, and a reload takes effect at once', () => {
      const { g, set } = guard({ failuresPerAddress: 0, unknownKeyLookupsPerSecond: 0 });
      for (let i = 0; i < 100; i++) admitted(g.admit('a')).settle('invalid');
      set({ failuresPerAddress: 1 });
      admitted(g.admit('a')).settle('invalid');
      expect(g.admit('a').admitted).toBe(false);
    });
  });

  describe("the replica's ceiling on lookups of unknown keys", () => {
    it('admits a burst, then the rate, and says when the next gets in', () => {
      const { g, clock } = guard({ failuresPerAddress: 0, unknownKeyLookupsPerSecond: 4, unknownKeyLookupBurst: 3 });
      for (let i = 0; i < 3; i++) admitted(g.admit(`x${i}`)).settle('invalid');
      expect(g.admit('y')).toEqual({ admitted: false, reason: 'lookup_ceiling', retryAfterSeconds: 1 });
      clock.advance(250);
      admitted(g.admit('y')).settle('invalid');
      expect(g.admit('z').admitted).toBe(false);
    });

    it('rounds Retry-After up to whole seconds at a slow rate', () => {
      const { g } = guard({ failuresPerAddress: 0, unknownKeyLookupsPerSecond: 1, unknownKeyLookupBurst: 1 });
      admitted(g.admit('a')).settle('invalid');
      expect(g.admit('b')).toMatchObject({ retryAfterSeconds: 1 });
    });

    it('gets its place back from a valid key: new valid keys one after another never reach it', () => {
      const { g } = guard({ failuresPerAddress: 0, unknownKeyLookupsPerSecond: 1, unknownKeyLookupBurst: 1 });
      for (let i = 0; i < 50; i++) admitted(g.admit(`u${i}`)).settle('valid');
    });

    it("refuses by the ceiling without spending the address's budget", () => {
      const { g, set } = guard({ failuresPerAddress: 1, unknownKeyLookupsPerSecond: 1, unknownKeyLookupBurst: 1 });
      admitted(g.admit('other')).settle('invalid');
      expect(g.admit('a')).toMatchObject({ reason: 'lookup_ceiling' });
      set({ unknownKeyLookupsPerSecond: 0 });
      admitted(g.admit('a'));
    });
  });
});
