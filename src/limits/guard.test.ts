import pino from 'pino';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { StoreUnavailableError } from '../store/unavailable.js';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import { NotSentError, type Decision, type LimitCheck, type OutageAdmission, type Store } from '../store/types.js';
import { GuardedLimits } from './guard.js';
import { OutageLedger } from './outage-ledger.js';
import { nextTurn } from '../../test/support/time.js';

const checks: LimitCheck[] = [{ kind: 'window', key: 'k', limit: 2, windowMs: 60_000 }];

/** A Redis-like store whose decisions fail, either with a rejected promise or a throw at once. */
function failingStore(how: 'reject' | 'throw'): Store {
  const s = new MemoryStore() as unknown as Store & { kind: string };
  Object.defineProperty(s, 'kind', { value: 'redis' });
  s.consume = () => {
    if (how === 'throw') throw new Error('connection is closed');
    return Promise.reject(new Error('command timed out'));
  };
  return s;
}

describe('GuardedLimits', () => {
  for (const how of ['reject', 'throw'] as const) {
    it(`when the store fails (${how}), "open" decides in this replica and counts the degraded decision`, async () => {
      const metrics = new Metrics({ processMetrics: false });
      const g = new GuardedLimits(failingStore(how), metrics, () => 'open');
      const verdicts = [];
      for (let i = 0; i < 3; i++) verdicts.push((await g.consume(checks, 1000, `m${i}`, 'free_tier')).admitted);
      expect(verdicts).toEqual([true, true, false]); // the local window still holds the limit
      expect((await metrics.degradedDecisions.get()).values).toEqual([{ value: 3, labels: { limit: 'free_tier' } }]);
      expect((await metrics.storeErrors.get()).values).toEqual([{ value: 3, labels: { op: 'consume' } }]);
    });

    it(`when the store fails (${how}), forgets what it counted of a subject once told its limits were reset, and only that subject's`, async () => {
      const g = new GuardedLimits(failingStore(how), new Metrics({ processMetrics: false }), () => 'open');
      const of = (subject: string): LimitCheck[] => [{ ...checks[0]!, subject }];
      for (const subject of ['u:a', 'u:b']) {
        for (let i = 0; i < 2; i++) await g.consume(of(subject), 1000, `${subject}${i}`, 'free_tier');
        expect((await g.consume(of(subject), 1000, `${subject}x`, 'free_tier')).admitted).toBe(false);
      }
      g.forget('u:a');
      expect((await g.consume(of('u:a'), 1000, 'a-again', 'free_tier')).admitted).toBe(true);
      expect((await g.consume(of('u:b'), 1000, 'b-again', 'free_tier')).admitted).toBe(false);
    });

    it(`when the store fails (${how}), "closed" answers with StoreUnavailableError`, async () => {
      const g = new GuardedLimits(failingStore(how), new Metrics({ processMetrics: false }), () => 'closed');
      await expect(g.consume(checks, 1000, 'm', 'free_tier')).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  }
});

describe('GuardedLimits and the outage replay', () => {
  it('keeps what "open" admitted (a decision never sent as not counted, one sent without answer as maybe counted, refusals not at all) and replays it, before the next decision, once the store answers', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    onTestFinished(() => void vi.useRealTimers());
    let answer: () => Promise<Decision> = () => Promise.reject(new NotSentError('not connected'));
    let down = true;
    const replayed: OutageAdmission[] = [];
    const sent: string[] = [];
    const s = new MemoryStore() as unknown as Store & { kind: string };
    Object.defineProperty(s, 'kind', { value: 'redis' });
    s.consume = (_checks, _now, member) => {
      sent.push(member);
      return answer();
    };
    s.replayAdmissions = async (admissions) => {
      // As the Redis store: nothing asked without a connection, every admission left to retry.
      if (down) return admissions.map(() => 'retry' as const);
      sent.push('replay');
      replayed.push(...admissions);
      return admissions.map(() => 'replayed' as const);
    };
    const metrics = new Metrics({ processMetrics: false });
    const g = new GuardedLimits(s, metrics, () => 'open', new OutageLedger(s, metrics, pino({ level: 'silent' }), () => 1000));
    expect((await g.consume(checks, 1000, 'm1', 'free_tier')).admitted).toBe(true);
    answer = () => Promise.reject(new Error('Command timed out'));
    expect((await g.consume(checks, 1000, 'm2', 'free_tier')).admitted).toBe(true);
    expect((await g.consume(checks, 1000, 'm3', 'free_tier')).admitted).toBe(false); // the local window is full
    expect(replayed).toEqual([]);
    answer = () => Promise.resolve({ admitted: true, used: [1], resetMs: [60_000] });
    down = false;
    // The store answers again once the pause after the last failed replay (a second) is over.
    vi.advanceTimersByTime(1000);
    await g.consume(checks, 1000, 'm4', 'free_tier');
    await nextTurn();
    expect(replayed.map((a) => [a.member, a.maybeCounted])).toEqual([
      ['m1', false],
      ['m2', true],
    ]);
    // The replay went to the store ahead of the decision that found it waiting.
    expect(sent.slice(-2)).toEqual(['replay', 'm4']);
  });
});
