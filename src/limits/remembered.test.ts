import { describe, expect, it } from 'vitest';
import { RememberedRefusals } from './remembered.js';

describe('RememberedRefusals', () => {
  it('keeps an entry until its own end or maxAgeMs, whichever comes first', () => {
    const r = new RememberedRefusals({ maxAgeMs: 10_000, max: 10 });
    r.keep('short', { until: 3_000 }, 0);
    r.keep('long', { until: 60_000 }, 0);
    expect(r.get('short', 2_999)).toBeDefined();
    expect(r.get('short', 3_000)).toBeUndefined();
    expect(r.get('long', 9_999)).toBeDefined();
    expect(r.get('long', 10_000)).toBeUndefined();
    expect(r.size).toBe(0); // expired entries are dropped when read
  });

  it('keeps nothing when maxAgeMs is 0', () => {
    const r = new RememberedRefusals({ maxAgeMs: 0, max: 10 });
    r.keep('a', { until: 5_000 }, 0);
    expect(r.get('a', 1)).toBeUndefined();
    expect(r.size).toBe(0);
  });

  it('drops expired entries of subjects that never come back', () => {
    const r = new RememberedRefusals({ maxAgeMs: 10_000, max: 1000 });
    for (let i = 0; i < 100; i++) r.keep(`idle-${i}`, { until: 60_000 }, i);
    expect(r.size).toBe(100);
    r.keep('late', { until: 60_000 }, 20_000); // all the idle ones ended by 10,099
    expect(r.size).toBe(1);
  });

  it('holds at most max entries, forgetting the oldest refusal first; keeping a subject again makes it the newest', () => {
    const r = new RememberedRefusals({ maxAgeMs: 10_000, max: 3 });
    r.keep('a', { until: 9_000 }, 0);
    r.keep('b', { until: 9_000 }, 0);
    r.keep('c', { until: 9_000 }, 0);
    r.keep('a', { until: 9_000 }, 1); // a is now the newest
    r.keep('d', { until: 9_000 }, 1);
    expect(['a', 'b', 'c', 'd'].filter((k) => r.get(k, 2) !== undefined)).toEqual(['a', 'c', 'd']);
  });

  it('at the bound, keeps the subject whose retries it is answering and forgets one refused earlier and not seen since', () => {
    const r = new RememberedRefusals({ maxAgeMs: 10_000, max: 2 });
    r.keep('retrying', { until: 9_000 }, 0);
    r.keep('gone', { until: 9_000 }, 0);
    expect(r.get('retrying', 1)).toBeDefined(); // a retry answered from memory
    r.keep('new', { until: 9_000 }, 2);
    expect(['retrying', 'gone', 'new'].filter((k) => r.get(k, 3) !== undefined)).toEqual(['retrying', 'new']);
  });

  it('clear forgets everything', () => {
    const r = new RememberedRefusals({ maxAgeMs: 10_000, max: 3 });
    r.keep('a', { until: 9_000 }, 0);
    r.clear();
    expect(r.get('a', 1)).toBeUndefined();
  });

  it('caps how long a refusal is kept without changing the refusal it hands back', () => {
    const r = new RememberedRefusals<{ until: number; retryAt: number }>({ maxAgeMs: 1000, max: 3 });
    const refusal = { until: 5000, retryAt: 5000 };
    r.keep('a', refusal, 0);
    expect(r.get('a', 999)).toBe(refusal);
    expect(refusal).toEqual({ until: 5000, retryAt: 5000 });
    expect(r.get('a', 1000)).toBeUndefined();
  });
});
