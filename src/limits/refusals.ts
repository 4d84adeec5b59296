/**
 * Refusals kept in memory while the store could only repeat them. A refused call counts nothing,
 * so a subject's counts only move when a counted call leaves its window (or the day ends): until
 * then asking the store again gives the same answer. The limiters decide how long that is; this
 * only holds the entries, bounded, the oldest forgotten first (it only costs that subject one
 * round trip).
 */
export interface Kept {
  /** Until this instant (sidecar clock, ms) the store's answer is certain to be the same. */
  until: number;
}

export class Refusals<T extends Kept> {
  private readonly map = new Map<string, T>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.map.size;
  }

  /** The refusal kept for `subject` if it still holds at `now`; an expired one is dropped. */
  get(subject: string, now: number): T | undefined {
    if (this.map.size === 0) return undefined;
    const r = this.map.get(subject);
    if (r === undefined) return undefined;
    if (now < r.until) return r;
    this.map.delete(subject);
    return undefined;
  }

  keep(subject: string, r: T, now: number): void {
    if (!(r.until > now) || this.max <= 0) return;
    this.map.delete(subject); // re-inserted last: Map order is refusal order
    if (this.map.size >= this.max) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(subject, r);
  }
}
