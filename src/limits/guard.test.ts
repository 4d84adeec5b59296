import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../answers/errors.js';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import type { LimitCheck, Store } from '../store/types.js';
import { GuardedLimits } from './guard.js';

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

    it(`when the store fails (${how}), "closed" answers with StoreUnavailableError`, async () => {
      const g = new GuardedLimits(failingStore(how), new Metrics({ processMetrics: false }), () => 'closed');
      await expect(g.consume(checks, 1000, 'm', 'free_tier')).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  }
});
