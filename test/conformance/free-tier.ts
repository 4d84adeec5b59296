/**
 * The free-tier part of the SDK conformance suite: a sluice with a day's budget on a clock the
 * test moves, or with one free call a second; spending the day; calls rejected without a retry;
 * an SDK's own retry of the 429.
 */
import { expect } from 'vitest';
import { ManualClock, useHarness, type Harness, type HarnessOptions, type StoreKind } from '../support/harness.js';
import { BEIJING_NOON, expectEachRejected, type CountingFetch } from './support.js';

/**
 * A sluice on `kind` with a day's free tier of 25 calls (20 a minute, the default), on a clock
 * that starts at BEIJING_NOON and moves only when a test says.
 */
export function useFreeTierHarness(kind: StoreKind): { h: Harness; clock: ManualClock } {
  const clock = new ManualClock(BEIJING_NOON);
  return { h: useHarness({ store: kind, clock, file: { freeTier: { perDay: 25 } } }), clock };
}

/** One free call a second: Retry-After is 1 s, so an SDK that waits for it waits briefly. */
export const ONE_FREE_CALL_A_SECOND: HarnessOptions = { store: 'redis', file: { freeTier: { perMinute: 1, windowSeconds: 1 } } };

/**
 * The day's free tier of `useFreeTierHarness` spent: 20 calls with `first` (a minute's worth),
 * then, a minute on, 5 with `then`, and the clock moved past that minute too.
 */
export async function spendTheDay(clock: ManualClock, first: () => PromiseLike<unknown>, then: () => PromiseLike<unknown>): Promise<void> {
  for (let i = 0; i < 20; i++) await first();
  clock.advance(61_000);
  for (let i = 0; i < 5; i++) await then();
  clock.advance(61_000);
}

/**
 * Each call rejected as `check` expects, each after a single HTTP attempt that got `status`: the
 * SDK did not retry it.
 */
export async function expectEachRejectedOnce(
  counter: CountingFetch,
  status: number,
  calls: ReadonlyArray<() => PromiseLike<unknown>>,
  check: (err: unknown) => void,
): Promise<void> {
  await expectEachRejected(calls, check);
  expect(counter.attempts.map((a) => a.status)).toEqual(calls.map(() => status));
}

/**
 * A Stainless-made SDK (openai, anthropic) retried the free-tier 429 on its own after the call
 * before: the retry waited Retry-After (1 s) and got in, and the relay saw the admitted calls
 * only, the retry marked by the SDK's retry counter.
 */
export function expectRetriedAfterRetryAfter(h: Harness, counter: CountingFetch): void {
  expect(counter.attempts.map((a) => a.status)).toEqual([200, 429, 200]);
  const [, rejected, retried] = counter.attempts;
  expect(retried!.at - rejected!.at).toBeGreaterThanOrEqual(950); // Retry-After: 1
  expect(h.relay.requests.map((r) => r.headers['x-stainless-retry-count'])).toEqual(['0', '1']);
}
