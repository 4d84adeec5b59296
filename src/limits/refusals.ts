/**
 * Refusals kept in memory while the store could only repeat them. A refused call counts nothing,
 * so a subject's counts only move when a counted call leaves its window (or the day ends): until
 * then asking the store again gives the same answer, as long as nothing else changes the store
 * (Redis restarted empty, keys deleted by hand, replicas on different configs mid-reload). The
 * limiters decide how long the answer holds; this holds the entries, each at most `maxAgeMs`
 * (which bounds how stale an answer can get when the store does change behind our back), at most
 * `max` of them, the oldest forgotten first: forgetting only costs that subject one round trip.
 */
export interface Kept {
  /** Until this instant (sidecar clock, ms) the store's answer is certain to be the same. */
  until: number;
}

export interface RefusalsOptions {
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

/** Each limiter keeps at most this many refused subjects (the oldest are forgotten first). */
const MAX_KEPT = 10_000;

export function refusalsFor<T extends Kept>(opts: RememberRefusals): Refusals<T> {
  return new Refusals<T>({ maxAgeMs: opts.rememberRefusalsMs ?? 10_000, max: MAX_KEPT });
}

export class Refusals<T extends Kept> {
  /** Each refusal with the instant it is dropped: its own `until`, capped at `maxAgeMs` from when it was kept. */
  private readonly map = new Map<string, { until: number; refusal: T }>();
  /** The next instant the front of the map is checked for expired entries (once a second at most). */
  private sweepAt = 0;

  constructor(private readonly opts: RefusalsOptions) {}

  get size(): number {
    return this.map.size;
  }

  /** The refusal kept for `subject` if it still holds at `now`; an expired one is dropped. */
  get(subject: string, now: number): T | undefined {
    if (this.map.size === 0) return undefined;
    const kept = this.map.get(subject);
    if (kept === undefined) return undefined;
    if (now < kept.until) return kept.refusal;
    this.map.delete(subject);
    return undefined;
  }

  /** Keeps `r` until `r.until`, or `maxAgeMs` from `now` if that comes first. */
  keep(subject: string, r: T, now: number): void {
    if (this.opts.maxAgeMs <= 0 || this.opts.max <= 0) return;
    const until = Math.min(r.until, now + this.opts.maxAgeMs);
    if (!(until > now)) return;
    this.map.delete(subject); // re-inserted last: Map order is refusal order
    if (now >= this.sweepAt) {
      // Entries live at most maxAgeMs, so the oldest refusals mostly expire first: drop the
      // expired ones at the front so that idle subjects do not sit in memory until evicted. Once a
      // second, not per call: reaching the front of a Map walks past the slots deletes left.
      this.sweepAt = now + 1000;
      for (const [k, v] of this.map) {
        if (v.until > now) break;
        this.map.delete(k);
      }
    }
    if (this.map.size >= this.opts.max) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(subject, { until, refusal: r });
  }

  /** Forgets one subject's refusal (an operator reset its counts). */
  delete(subject: string): void {
    this.map.delete(subject);
  }

  /** Forgets everything: the store may have changed behind our back (it reconnected). */
  clear(): void {
    this.map.clear();
  }
}
