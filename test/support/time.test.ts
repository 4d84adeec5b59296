import { describe, expect, it } from 'vitest';
import { eventually, GiveUp, sleep } from './time.js';

describe('sleep', () => {
  it('resolves after the pause, not before', async () => {
    const t0 = performance.now();
    await sleep(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(29);
  });
});

describe('eventually', () => {
  it('retries a predicate until it is true, and a check until it stops throwing, returning its value', async () => {
    let n = 0;
    await expect(eventually(() => ++n >= 3, { intervalMs: 1 })).resolves.toBe(true);
    expect(n).toBe(3);
    let m = 0;
    const value = await eventually(
      async () => {
        m++;
        expect(m).toBe(4);
        return 'ready';
      },
      { intervalMs: 1 },
    );
    expect(value).toBe('ready');
  });

  it('passes a value that is falsy but not false (0, "", undefined from an expect-only check)', async () => {
    await expect(eventually(() => 0)).resolves.toBe(0);
    await expect(eventually(() => undefined)).resolves.toBeUndefined();
  });

  it('throws the last assertion at the timeout, prefixed with what it waited for, keeping expected and actual', async () => {
    let n = 0;
    const err = (await eventually(() => expect(++n).toBe(-1), { timeoutMs: 60, intervalMs: 10, what: 'n to be -1' }).catch((e: unknown) => e)) as Error & {
      expected?: unknown;
      actual?: unknown;
    };
    expect(err.message).toMatch(/^timed out after 60 ms \(\d+ tries\) waiting for n to be -1: expected \d+ to be -1/);
    expect(err.expected).toBe(-1);
    expect(n).toBeGreaterThan(2);
  });

  it('says so when a predicate stayed false, and stops at once on GiveUp', async () => {
    await expect(eventually(() => false, { timeoutMs: 20, intervalMs: 5, what: 'never' })).rejects.toThrow(/waiting for never: it was still false$/);
    let n = 0;
    const t0 = Date.now();
    await expect(
      eventually(
        () => {
          if (++n === 2) throw new GiveUp('the child exited');
          return false;
        },
        { timeoutMs: 5_000, intervalMs: 1 },
      ),
    ).rejects.toThrow(/^the child exited$/);
    expect(n).toBe(2);
    expect(Date.now() - t0).toBeLessThan(1_000);
  });
});
