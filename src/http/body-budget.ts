/**
 * One byte budget over every request body sluice holds at once, raw as received and decoded for
 * inspection. A body must be in memory before it is forwarded (the model is read from it), so
 * without a budget a few large or compressed bodies sent together take the process past its
 * memory limit, and the kernel's OOM kill cuts every stream the replica serves. With it, the
 * request that would go past the budget is answered 503 and nothing already admitted is touched.
 *
 * Accounting is a pair of additions per chunk: no promise, timer or allocation beyond the lease
 * (one small object per request that has a body).
 */

export class BodyBudget {
  /** Bytes held by all leases now. */
  used = 0;

  constructor(public limit: number) {}

  get free(): number {
    return this.limit - this.used;
  }

  lease(): BodyLease {
    return new BodyLease(this);
  }
}

/**
 * What one request holds of the budget. Released once, by whichever comes first: its body handed
 * to the relay's socket, or its response closing (any ending: answered, refused, failed, cut).
 */
export class BodyLease {
  held = 0;

  constructor(private readonly budget: BodyBudget) {}

  /** Whether `n` more bytes would fit now (nothing is taken). */
  fits(n: number): boolean {
    return this.budget.used + n <= this.budget.limit;
  }

  /** Takes `n` more bytes, or nothing and false when the budget cannot spare them. */
  take(n: number): boolean {
    const b = this.budget;
    if (b.used + n > b.limit) return false;
    b.used += n;
    this.held += n;
    return true;
  }

  /** Gives back `n` of the bytes held (never more than is held). */
  give(n: number): void {
    const k = Math.min(n, this.held);
    this.held -= k;
    this.budget.used -= k;
  }

  /** Gives back everything held; later calls do nothing. */
  release(): void {
    this.budget.used -= this.held;
    this.held = 0;
  }
}
