/**
 * Refusals kept in memory while the store could only repeat them. A refused call counts nothing,
 * so a subject's counts only move when a counted call leaves its window (or the day ends): until
 * then asking the store again gives the same answer, as long as nothing else changes the store
 * (Redis restarted empty, keys deleted by hand, replicas on different configs mid-reload). The
 * limiters decide how long the answer holds; this holds the entries, each at most `maxAgeMs`
 * (which bounds how stale an answer can get when the store does change behind our back), at most
 * `max` of them, the subject refused or retried least recently forgotten first: forgetting only
 * costs that subject one round trip.
 */
import { LRUCache } from 'lru-cache';
import { DEFAULTS } from '../config/index.js';

export interface Kept {
  /** Until this instant (sidecar clock, ms) the store's answer is certain to be the same. */
  until: number;
}

export interface RememberedRefusalsOptions {
  /** Longest an entry is kept, ms (0: nothing is kept). */
  maxAgeMs: number;
  /** Most entries at once. */
  max: number;
}

/** What a limiter takes: how long a refusal may answer its subject's retries. */
export interface RememberRefusals {
  /** At most this long, ms (default 10 s, `limits.rememberRefusalsSeconds`; 0: always ask the store). */
  rememberRefusalsMs?: number;
}

/** Each limiter keeps at most this many refused subjects (the least recently refused or retried are forgotten first). */
const MAX_KEPT = 10_000;

export function refusalsFor<T extends Kept>(opts: RememberRefusals): RememberedRefusals<T> {
  return new RememberedRefusals<T>({ maxAgeMs: opts.rememberRefusalsMs ?? DEFAULTS.limits.rememberRefusalsSeconds * 1000, max: MAX_KEPT });
}

interface Entry<T> {
  /** When the entry is dropped: the refusal's own `until`, capped at `maxAgeMs` from when it was kept. */
  until: number;
  refusal: T;
}

export class RememberedRefusals<T extends Kept> {
  /**
   * lru-cache holds the bound and the order (a retry that is answered from here makes the subject
   * the most recent). Each entry ends at its own `until`, checked here: the limiters pass the
   * instant they decide at, a refusal must end exactly when the store would admit, and lru-cache's
   * ttl runs on its own clock and keeps an entry up to its ttl inclusive.
   */
  private readonly kept: LRUCache<string, Entry<T>>;
  /** The next instant the least recent entries are checked for expired ones (once a second at most). */
  private sweepAt = 0;

  constructor(private readonly opts: RememberedRefusalsOptions) {
    this.kept = new LRUCache({ max: Math.max(1, opts.max) });
  }

  get size(): number {
    return this.kept.size;
  }

  /** The refusal kept for `subject` if it still holds at `now`; an expired one is dropped. */
  get(subject: string, now: number): T | undefined {
    const kept = this.kept.get(subject);
    if (kept === undefined) return undefined;
    if (now < kept.until) return kept.refusal;
    this.kept.delete(subject);
    return undefined;
  }

  /** Keeps `r` until `r.until`, or `maxAgeMs` from `now` if that comes first. */
  keep(subject: string, r: T, now: number): void {
    if (this.opts.maxAgeMs <= 0 || this.opts.max <= 0) return;
    const until = Math.min(r.until, now + this.opts.maxAgeMs);
    if (!(until > now)) return;
    if (now >= this.sweepAt) {
      this.sweepAt = now + 1000;
      this.sweep(now);
    }
    this.kept.set(subject, { until, refusal: r });
  }

  /**
   * Entries live at most maxAgeMs, so the least recently used mostly expire first: drop the
   * expired ones at that end so that idle subjects do not sit in memory until evicted.
   */
  private sweep(now: number): void {
    const expired: string[] = [];
    // Collected first: lru-cache's iterators do not allow deleting as they go.
    for (const subject of this.kept.rkeys()) {
      if ((this.kept.peek(subject)?.until ?? now) > now) break;
      expired.push(subject);
    }
    for (const subject of expired) this.kept.delete(subject);
  }

  /** Forgets one subject's refusal (an operator reset its counts). */
  delete(subject: string): void {
    this.kept.delete(subject);
  }

  /** Forgets everything: the store may have changed behind our back (it reconnected). */
  clear(): void {
    this.kept.clear();
  }
}
