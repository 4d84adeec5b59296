/**
 * Puts the store's limit calls under the outage policy. With
 * `limits.onStoreError: open` (the default, as Envoy and Kong do) a decision
 * the store cannot take is taken by this replica alone, in memory, so
 * clients keep working with per-replica limits; with `closed` the caller
 * answers 503. Either way nothing waits longer than the store's command bound.
 */
import { StoreUnavailableError } from '../answers/errors.js';
import type { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import type { Decision, LimitCheck, LimitState, Store } from '../store/types.js';

/** `degraded`: taken by this replica alone because the store could not be asked (an outage). */
export type GuardedDecision = Decision & { degraded?: true };

export interface LimitStore {
  consume(checks: readonly LimitCheck[], nowMs: number, member: string, limit: string): Promise<GuardedDecision>;
  inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]>;
  /** Deletes a subject's counts for every replica (an operator's reset); every replica then forgets its own state of it. */
  resetLimits(subject: string, checks: readonly LimitCheck[]): Promise<void>;
}

export class GuardedLimits implements LimitStore {
  private readonly local = new MemoryStore();

  constructor(
    private readonly store: Store,
    private readonly metrics: Metrics,
    private readonly onStoreError: () => 'open' | 'closed',
  ) {}

  consume(checks: readonly LimitCheck[], nowMs: number, member: string, limit: string): Promise<GuardedDecision> {
    if (this.store.kind === 'memory') return this.store.consume(checks, nowMs, member);
    // One promise step instead of nested async wrappers: this runs on every free call.
    const start = performance.now();
    let pending: Promise<GuardedDecision>;
    try {
      pending = this.store.consume(checks, nowMs, member);
    } catch (err) {
      pending = Promise.reject(err); // a store that throws at once gets the same outage policy
    }
    return pending.then(
      (d) => {
        this.metrics.observeStore('consume', start, false);
        return d;
      },
      (err: unknown) => {
        this.metrics.observeStore('consume', start, true);
        if (this.onStoreError() === 'closed') throw new StoreUnavailableError(err);
        this.metrics.degradedDecisions.inc({ limit });
        const d: GuardedDecision = this.local.consumeSync(checks, nowMs);
        d.degraded = true;
        return d;
      },
    );
  }

  async inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    try {
      return await this.store.inspect(checks, nowMs);
    } catch (err) {
      throw new StoreUnavailableError(err);
    }
  }

  async resetLimits(subject: string, checks: readonly LimitCheck[]): Promise<void> {
    try {
      await this.store.resetLimits(subject, checks);
    } catch (err) {
      throw new StoreUnavailableError(err);
    }
  }

  /** Forgets what this replica counted of `subject` in memory during an outage (its limits were reset). */
  forget(subject: string): void {
    this.local.forgetSubject(subject);
  }
}
