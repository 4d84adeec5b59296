/**
 * Which lookups of keys a replica does not know may start. A wrong key cannot be cached until it
 * has been looked up, so a client sending random keys would cost the key stores (the relay's
 * database, Redis) one lookup per request. Two budgets bound that, both in this replica's memory
 * (a failure costs no round trip to count):
 * - per client address, `auth.failuresPerAddress` lookups that end without a valid key, refilled
 *   evenly over `auth.failureWindowSeconds`: once spent, that address's unknown keys get the
 *   contract's 401 without a lookup;
 * - per replica, `auth.unknownKeyLookupsPerSecond` such lookups a second, at most
 *   `auth.unknownKeyLookupBurst` at once: past it an unknown key gets 503 `store_unavailable` with
 *   Retry-After, since it may be a valid new key.
 * A lookup takes a place in both when it starts (lookups in flight count, so a burst of
 * concurrent requests cannot overshoot) and gives both back when it finds a valid key or could not
 * be made (an outage is not the client's failure). Keys the replica knows are never asked here.
 *
 * An address whose budget is held by its own lookups in flight has not failed yet: a replica
 * meeting many valid keys from one address at once (a new replica in a rollout, an office behind
 * one NAT address) would otherwise answer some of them 401, which clients do not retry. Its next
 * unknown keys wait, first come first served, and are judged again as places come back: one
 * waiter per place given back, every waiter once the address has no lookup left in flight (if
 * failures spent the budget, their answer is the 401). At most
 * `auth.unknownKeyLookupBurst` requests wait per replica; past it, 503 with Retry-After, as at
 * the ceiling, under a reason of its own (`lookup_queue_full`): the remedy differs.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { AuthConfig } from '../config/index.js';
import { retryAfterSeconds } from '../limits/retry-after.js';
import type { Clock } from '../runtime/clock.js';

/** A lookup may start (call `settle` once it has ended), or not, and why. */
export type LookupAdmission =
  | { admitted: true; settle: (outcome: 'valid' | 'invalid' | 'failed') => void }
  | { admitted: false; reason: 'address_budget' }
  /** The address's budget is held by its lookups in flight: ask again once `settled` (one of them ended). */
  | { admitted: false; reason: 'address_pending'; settled: Promise<void> }
  | { admitted: false; reason: 'lookup_ceiling'; retryAfterSeconds: number }
  /** `auth.unknownKeyLookupBurst` requests already wait for their addresses' lookups. */
  | { admitted: false; reason: 'lookup_queue_full'; retryAfterSeconds: number };

/** Why a lookup was refused outright (not `address_pending`, which waits). */
export type LookupRefusal = Exclude<Extract<LookupAdmission, { admitted: false }>['reason'], 'address_pending'>;

/** Every refusal, typed as a record so that tsc fails when a new reason is left out. */
const REFUSALS: Readonly<Record<LookupRefusal, true>> = { address_budget: true, lookup_ceiling: true, lookup_queue_full: true };

/** Every refusal, as `sluice_key_lookups_refused_total` labels them. */
export const LOOKUP_REFUSALS = Object.keys(REFUSALS) as readonly LookupRefusal[];

export function isLookupRefusal(reason: string): reason is LookupRefusal {
  return Object.hasOwn(REFUSALS, reason);
}

/** A budget refilled evenly: `tokens` at `at`, at most `capacity`. */
interface Bucket {
  tokens: number;
  at: number;
  /** When this address last had a line logged for spending its budget. */
  loggedAt?: number;
}

function refill(b: Bucket, capacity: number, perMs: number, now: number): void {
  if (now > b.at) b.tokens = Math.min(capacity, b.tokens + (now - b.at) * perMs);
  b.at = now;
}

/** An address's lookups in flight, and the requests waiting for a place among them, oldest first. */
interface InFlight {
  count: number;
  waiters: Array<() => void>;
}

/** While the ceiling holds, at most one log line this often. */
const CEILING_LOG_MS = 60_000;

export class LookupGuard {
  /**
   * Addresses with a budget not full, at most `auth.maxAddresses`, the one longest untouched
   * forgotten first. Touched means taken from: a refused address is read with `peek`, so an
   * address that only sends refused keys does not keep its place.
   */
  private addresses: LRUCache<string, Bucket>;
  private readonly replica: Bucket;
  /** Addresses with lookups in flight (as many as there are lookups at most: each ends). */
  private readonly inFlight = new Map<string, InFlight>();
  /** Requests waiting for their address's lookups in flight, on this replica. */
  private waitingNow = 0;
  private ceilingLoggedAt = -Infinity;
  private ceilingRefusals = 0;

  constructor(
    private readonly settings: () => AuthConfig,
    private readonly clock: Clock,
    private readonly log?: Logger,
  ) {
    this.replica = { tokens: settings().unknownKeyLookupBurst, at: clock.now() };
    this.addresses = new LRUCache({ max: settings().maxAddresses });
  }

  /** Requests waiting now for their address's lookups in flight (`sluice_key_lookups_waiting`). */
  get waiting(): number {
    return this.waitingNow;
  }

  /** Addresses tracked now (those whose budget is not full). */
  get tracked(): number {
    return this.addresses.size;
  }

  admit(address: string): LookupAdmission {
    const s = this.settings();
    const now = this.clock.now();
    const perAddress = s.failuresPerAddress > 0;
    const bucket = perAddress ? this.addressBucket(address, s, now) : null;
    if (bucket && bucket.tokens < 1) {
      const flying = this.inFlight.get(address);
      if (flying !== undefined && bucket.tokens + flying.count >= 1) {
        if (this.waitingNow >= s.unknownKeyLookupBurst) return { admitted: false, reason: 'lookup_queue_full', retryAfterSeconds: 1 };
        return { admitted: false, reason: 'address_pending', settled: this.wait(flying) };
      }
      if (this.log && !(now - (bucket.loggedAt ?? -Infinity) < s.failureWindowSeconds * 1000)) {
        bucket.loggedAt = now;
        this.log.warn(
          { ip: address, failures: s.failuresPerAddress, windowSeconds: s.failureWindowSeconds },
          'client address spent its budget of failed key lookups: its unknown keys get 401 without a lookup (auth.failuresPerAddress)',
        );
      }
      return { admitted: false, reason: 'address_budget' };
    }
    if (s.unknownKeyLookupsPerSecond > 0) {
      const perMs = s.unknownKeyLookupsPerSecond / 1000;
      refill(this.replica, s.unknownKeyLookupBurst, perMs, now);
      if (this.replica.tokens < 1) {
        this.ceilingRefusals++;
        if (this.log && now - this.ceilingLoggedAt >= CEILING_LOG_MS) {
          this.log.warn(
            { perSecond: s.unknownKeyLookupsPerSecond, refused: this.ceilingRefusals },
            'lookups of unknown keys at their ceiling: unknown keys get 503 store_unavailable (auth.unknownKeyLookupsPerSecond)',
          );
          this.ceilingLoggedAt = now;
          this.ceilingRefusals = 0;
        }
        return { admitted: false, reason: 'lookup_ceiling', retryAfterSeconds: retryAfterSeconds((1 - this.replica.tokens) / perMs) };
      }
      this.replica.tokens -= 1;
    }
    const fromReplica = s.unknownKeyLookupsPerSecond > 0;
    if (bucket) this.take(address, bucket, s);
    const flying = bucket ? this.fly(address) : null;
    let settled = false;
    return {
      admitted: true,
      settle: (outcome) => {
        if (settled) return;
        settled = true;
        if (outcome !== 'invalid') this.giveBack(address, perAddress, fromReplica);
        if (flying !== null) this.land(address, flying, outcome !== 'invalid');
      },
    };
  }

  private fly(address: string): InFlight {
    let f = this.inFlight.get(address);
    if (f === undefined) this.inFlight.set(address, (f = { count: 0, waiters: [] }));
    f.count++;
    return f;
  }

  private wait(f: InFlight): Promise<void> {
    this.waitingNow++;
    return new Promise((resolve) =>
      f.waiters.push(() => {
        this.waitingNow--;
        resolve();
      }),
    );
  }

  /**
   * One of the address's lookups ended, its place given back or spent. A place given back goes to
   * the oldest waiter. Every waiter is judged again once none is left in flight (if failures spent
   * the budget, their answer is the 401), or when the address's budget is full again (forgotten);
   * otherwise a spent place changes nothing for them.
   */
  private land(address: string, f: InFlight, gaveBack: boolean): void {
    if (--f.count === 0) this.inFlight.delete(address);
    if (f.count === 0 || !this.addresses.has(address)) {
      for (const wake of f.waiters.splice(0)) wake();
    } else if (gaveBack) {
      f.waiters.shift()?.();
    }
  }

  /** The address's budget refilled to now: the one kept, or a full one (not kept until it is taken from). */
  private addressBucket(address: string, s: AuthConfig, now: number): Bucket {
    const b = this.addresses.peek(address);
    if (b === undefined) return { tokens: s.failuresPerAddress, at: now };
    refill(b, s.failuresPerAddress, s.failuresPerAddress / (s.failureWindowSeconds * 1000), now);
    return b;
  }

  /** Takes one from the address's budget and makes it the most recently touched. */
  private take(address: string, b: Bucket, s: AuthConfig): void {
    b.tokens -= 1;
    if (this.addresses.max !== s.maxAddresses) this.resize(s.maxAddresses);
    this.addresses.set(address, b);
  }

  /**
   * A reload changed `auth.maxAddresses` (lru-cache's bound is fixed when it is made): the
   * addresses move to a new cache, longest untouched first, so the order is kept and a smaller
   * bound forgets the longest untouched.
   */
  private resize(max: number): void {
    const next = new LRUCache<string, Bucket>({ max });
    for (const address of this.addresses.rkeys()) {
      const b = this.addresses.peek(address);
      if (b !== undefined) next.set(address, b);
    }
    this.addresses = next;
  }

  /** Gives back what a lookup took (settings may have changed since: a budget turned off takes nothing back). */
  private giveBack(address: string, fromAddress: boolean, fromReplica: boolean): void {
    const s = this.settings();
    const now = this.clock.now();
    if (fromReplica && s.unknownKeyLookupsPerSecond > 0) {
      refill(this.replica, s.unknownKeyLookupBurst, s.unknownKeyLookupsPerSecond / 1000, now);
      this.replica.tokens = Math.min(s.unknownKeyLookupBurst, this.replica.tokens + 1);
    }
    if (!fromAddress || s.failuresPerAddress <= 0) return;
    const b = this.addresses.peek(address);
    if (b === undefined) return;
    refill(b, s.failuresPerAddress, s.failuresPerAddress / (s.failureWindowSeconds * 1000), now);
    b.tokens += 1;
    // A full budget is what an untracked address has: nothing to keep.
    if (b.tokens >= s.failuresPerAddress) this.addresses.delete(address);
  }
}
