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

/** Why a body was refused for want of room (BodyBudget.tighterBound). */
export const BUSY_BOUNDS = ['budget_full', 'address_share'] as const;
export type BusyBound = (typeof BUSY_BOUNDS)[number];

/** A request body (raw or decoded) would take the bodies in flight past their memory budget. */
export class BodyBudgetExceededError extends Error {
  override name = 'BodyBudgetExceededError';
}

export class BodyBudget {
  /** Bytes held by all leases now. */
  used = 0;
  /** Bytes held now by each client address bucket that holds some. */
  private readonly byAddress = new Map<string, number>();

  /**
   * @param perAddress what one client address bucket (src/http/address-bucket.ts) may hold at most:
   * one client, or one office behind one address, sending large bodies slowly cannot take the
   * whole budget from everyone else (an attacker's probe held 63 of 64 MiB with two stalled
   * uploads of one key, for the request timeout's 300 s).
   */
  constructor(
    public limit: number,
    public perAddress: number = limit,
  ) {}

  get free(): number {
    return this.limit - this.used;
  }

  /** What a new body from `address` may take now: the budget's room, and its address's share. */
  freeFor(address: string): number {
    return Math.min(this.free, this.shareLeft(address));
  }

  /**
   * Which bound leaves `address` the less room now, for a refusal's metric label and access line:
   * the whole budget (`budget_full`), or its address's share (`address_share`).
   */
  tighterBound(address: string): BusyBound {
    return this.shareLeft(address) < this.free ? 'address_share' : 'budget_full';
  }

  /** What is left of `address`'s share. */
  private shareLeft(address: string): number {
    return this.perAddress - (this.byAddress.get(address) ?? 0);
  }

  lease(address: string): BodyLease {
    return new BodyLease(this, address);
  }

  /** @internal: a lease's bytes, counted in the budget and for its address. */
  add(address: string, n: number): void {
    this.used += n;
    const held = (this.byAddress.get(address) ?? 0) + n;
    if (held === 0) this.byAddress.delete(address);
    else this.byAddress.set(address, held);
  }
}

/**
 * What one request holds of the budget. Released once, by whichever comes first: its body handed
 * to the relay's socket, or its response closing (any ending: answered, refused, failed, cut).
 */
export class BodyLease {
  held = 0;

  constructor(
    private readonly budget: BodyBudget,
    private readonly address: string,
  ) {}

  /** Whether `n` more bytes would fit now (nothing is taken). */
  fits(n: number): boolean {
    return n <= this.budget.freeFor(this.address);
  }

  /** Takes `n` more bytes, or nothing and false when the budget (or its address's share) cannot spare them. */
  take(n: number): boolean {
    if (!this.fits(n)) return false;
    this.budget.add(this.address, n);
    this.held += n;
    return true;
  }

  /** Gives back `n` of the bytes held (never more than is held). */
  give(n: number): void {
    const k = Math.min(n, this.held);
    this.held -= k;
    this.budget.add(this.address, -k);
  }

  /** Gives back everything held; later calls do nothing. */
  release(): void {
    this.give(this.held);
  }
}
