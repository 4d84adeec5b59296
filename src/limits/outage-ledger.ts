/**
 * The calls this replica admitted on its own while the store could not decide
 * (`limits.onStoreError: open`), kept until the store answers again and then added to the shared
 * counts, each at its own time and at most once (the store recognises a call it already has by
 * its member: src/store/redis/lua/replay.lua). So the minute and the day stay exact across a
 * failover or a blip: what each replica counted in memory meanwhile is not lost.
 *
 * Bounded: at most MAX_OUTAGE_ADMISSIONS wait. Past that a call is still decided in memory but
 * not kept (counted as `dropped`, logged once per outage); calls whose windows and day are over
 * are let go first, since there is nothing left of them to count.
 */
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/index.js';
import type { OutageAdmission, ReplayOutcome, Store } from '../store/types.js';

/** Admissions kept for replay at most (about 400 bytes each, measured: 8 MB at the bound). */
export const MAX_OUTAGE_ADMISSIONS = 20_000;

/** Admissions handed to the store per call (it cuts them into script runs of up to 64). */
const CHUNK = 1024;

/** After a replay the store did not finish, the next waits this long (real time): decisions that succeed must not each start one. */
const RETRY_AFTER_MS = 1000;

/**
 * What became of a call admitted in memory during a store outage: the store's answer for it (but
 * `retry`, which is tried again), or `dropped` (the ledger was full: never kept). The
 * metric's `result` label and the log line at the outage's end.
 */
export type ReplayResult = Exclude<ReplayOutcome, 'retry'> | 'dropped';

type Tally = Record<ReplayResult, number>;

// Typed as a Tally, this literal must name every result: it is the one list of them.
const emptyTally = (): Tally => ({ replayed: 0, already_counted: 0, expired: 0, reset: 0, unknown: 0, failed: 0, dropped: 0 });

export const REPLAY_RESULTS = Object.keys(emptyTally()) as readonly ReplayResult[];

/** Whether anything of `a` is still counted at `now`: a window it is still in, or a day not over. */
function due(a: OutageAdmission, now: number): boolean {
  return a.checks.some((c) => (c.kind === 'window' ? a.nowMs + c.windowMs > now : c.resetAtMs > now));
}

export class OutageLedger {
  private waiting: OutageAdmission[] = [];
  private running: Promise<void> | null = null;
  /** What became of the admissions since the outage began, for the log line at its end. */
  private tally = emptyTally();
  private pruneAt = 0;
  /** No replay starts before this instant (performance.now()). */
  private retryAt = 0;

  constructor(
    private readonly store: Store,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Admissions waiting for the store. */
  get size(): number {
    return this.waiting.length;
  }

  record(a: OutageAdmission): void {
    if (this.store.replayAdmissions === undefined) return;
    if (this.waiting.length >= MAX_OUTAGE_ADMISSIONS) this.prune();
    if (this.waiting.length >= MAX_OUTAGE_ADMISSIONS) {
      if (this.tally.dropped === 0) {
        this.log.warn(
          { max: MAX_OUTAGE_ADMISSIONS },
          'store outage: too many calls admitted in memory to keep; further ones will not be added to the shared counts when it answers',
        );
      }
      this.count('dropped', 1);
      return;
    }
    this.waiting.push(a);
  }

  /**
   * The store connected again: the waiting admissions go now, ahead of any decision on the new
   * connection, whatever a replay that failed meanwhile said about waiting.
   */
  replayNow(): Promise<void> {
    this.retryAt = 0;
    return this.replay();
  }

  /**
   * Hands the waiting admissions to the store, in chunks, until none is left or the store stops
   * answering (those wait for the next call). One replay at a time: a call meanwhile joins it.
   */
  replay(): Promise<void> {
    if (this.running === null && this.waiting.length > 0 && performance.now() >= this.retryAt) {
      this.running = this.drain().finally(() => (this.running = null));
    }
    return this.running ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    const send = this.store.replayAdmissions?.bind(this.store);
    if (send === undefined) return;
    while (this.waiting.length > 0) {
      const chunk = this.waiting.slice(0, CHUNK);
      let outcomes: ReplayOutcome[];
      try {
        outcomes = await send(chunk, this.now());
      } catch (err) {
        this.retryAt = performance.now() + RETRY_AFTER_MS;
        this.log.error({ err: err instanceof Error ? err.message : String(err) }, 'store outage: replaying the calls admitted in memory failed');
        return;
      }
      const again: OutageAdmission[] = [];
      chunk.forEach((a, i) => {
        const o = outcomes[i] ?? 'retry';
        if (o === 'retry') again.push(a);
        else this.count(o, 1);
      });
      // While the chunk was out, admissions were recorded behind it and a reset may have let go of
      // some (forget): the sent ones are taken out by identity, and one to retry stays only if it is still waiting.
      const sent = new Set(chunk);
      const still = new Set(this.waiting);
      this.waiting = again.filter((a) => still.has(a)).concat(this.waiting.filter((a) => !sent.has(a)));
      if (again.length > 0) {
        this.retryAt = performance.now() + RETRY_AFTER_MS; // the store stopped answering: a later call goes on
        return;
      }
    }
    const t = this.tally;
    this.tally = emptyTally();
    this.log.info(
      { replayed: t.replayed, alreadyCounted: t.already_counted, expired: t.expired, reset: t.reset, unknown: t.unknown, failed: t.failed, dropped: t.dropped },
      'store answers again: calls admitted in memory during the outage added to the shared counts',
    );
  }

  /**
   * Lets go of the admissions of `subject` still waiting (an operator reset its limits): replayed
   * after the reset, they would bring back the counts it deleted. One already handed to the store
   * when the reset came may still be added.
   */
  forget(subject: string): void {
    this.waiting = this.waiting.filter((a) => !a.checks.some((c) => c.subject === subject));
  }

  /** Lets go of admissions with nothing left to count (once a second at most: it walks them all). */
  private prune(): void {
    const now = this.now();
    if (now < this.pruneAt) return;
    this.pruneAt = now + 1000;
    const before = this.waiting.length;
    this.waiting = this.waiting.filter((a) => due(a, now));
    this.count('expired', before - this.waiting.length);
  }

  private count(result: ReplayResult, n: number): void {
    if (n === 0) return;
    this.tally[result] += n;
    this.metrics.outageReplays.inc({ result }, n);
  }
}
