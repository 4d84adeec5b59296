/**
 * Puts the store's limit calls under the outage policy. With
 * `limits.onStoreError: open` (the default, as Envoy and Kong do) a decision
 * the store cannot take is taken by this replica alone, in memory, so
 * clients keep working with per-replica limits, and the calls it admits are
 * kept (outage-ledger.ts) to be added to the shared counts once the store
 * answers again; with `closed` the caller answers 503. Either way nothing
 * waits longer than the store's command bound.
 */
import { StoreUnavailableError } from '../store/unavailable.js';
import type { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import { NotSentError, type Decision, type LimitCheck, type LimitState, type Store } from '../store/types.js';
import type { OutageLedger } from './outage-ledger.js';

/** `degraded`: taken by this replica alone because the store could not be asked (an outage). */
export type GuardedDecision = Decision & { degraded?: true };

export interface LimitStore {
  consume(checks: readonly LimitCheck[], nowMs: number, member: string, limit: string): Promise<GuardedDecision>;
  inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]>;
  /** Deletes a subject's counts for every replica (an operator's reset); every replica then forgets its own state of it. */
  resetLimits(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void>;
}

export class GuardedLimits implements LimitStore {
  private readonly local = new MemoryStore();

  constructor(
    private readonly store: Store,
    private readonly metrics: Metrics,
    private readonly onStoreError: () => 'open' | 'closed',
    /** Where the calls admitted in memory wait for the store (none: they are not replayed). */
    private readonly ledger?: OutageLedger,
  ) {}

  consume(checks: readonly LimitCheck[], nowMs: number, member: string, limit: string): Promise<GuardedDecision> {
    if (this.store.kind === 'memory') return this.store.consume(checks, nowMs, member);
    // Calls admitted in memory during an outage go to the store ahead of this decision, on the same
    // connection (the replay's first runs are sent now, the decision at the turn's end), so that
    // Redis, which runs a connection's commands in order, decides it with them counted.
    if (this.ledger !== undefined && this.ledger.size > 0) void this.ledger.replay();
    // One promise step instead of nested async wrappers: this runs on every free call.
    const start = performance.now();
    let pending: Promise<GuardedDecision>;
    try {
      pending = this.store.consume(checks, nowMs, member);
    } catch (err) {
      // A store that throws at once gets the same outage policy; it was not asked.
      pending = Promise.reject(err instanceof Error ? new NotSentError(err.message) : err);
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
        if (d.admitted) this.ledger?.record({ checks, nowMs, member, maybeCounted: !(err instanceof NotSentError) });
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

  async resetLimits(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void> {
    try {
      await this.store.resetLimits(subject, checks, nowMs);
    } catch (err) {
      throw new StoreUnavailableError(err);
    }
  }

  /** Forgets what this replica counted of `subject` in memory during an outage, and its calls waiting to be replayed (its limits were reset). */
  forget(subject: string): void {
    this.local.forgetSubject(subject);
    this.ledger?.forget(subject);
  }
}
