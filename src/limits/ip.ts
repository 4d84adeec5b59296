/**
 * Per-client-IP limits on the query endpoints (contract §8), counted before
 * authentication so that unauthenticated floods are limited too. Rules are
 * matched first-wins; each rule is one shared budget for all its paths. An address counts in its
 * bucket (src/http/address-bucket.ts): an IPv4 address, or the IPv6 network of `ipv6Prefix` bits.
 */
import { addressBucket, canonicalAddress } from '../http/address-bucket.js';
import type { Clock } from '../runtime/clock.js';
import { DEFAULTS, type IpLimitRule } from '../config/index.js';
import type { WindowCheck } from '../store/types.js';
import type { LimitStore } from './guard.js';
import { nextMember } from './member.js';
import { bucketSubject, ipRuleLimit } from './names.js';
import { refusalsFor, type Kept, type RememberRefusals, type RememberedRefusals } from './remembered.js';
import { resetSeconds, retryAfterSeconds } from './retry-after.js';

/** `remembered`: a kept refusal answered it, without asking the store (limits.rememberRefusalsSeconds). */
export type IpVerdict = { admitted: true } | { admitted: false; retryAfterSeconds: number; remembered?: true };

/** One address's state under every rule now (the admin API's `GET /admin/ips/<address>/limits`). */
export interface IpLimitsState {
  /** The address, canonical (`::ffff:5.5.5.5` is `5.5.5.5`, IPv6 in RFC 5952 form). */
  address: string;
  /** What it counts as: itself (IPv4), or its IPv6 network of `ipv6Prefix` bits. */
  bucket: string;
  rules: Array<{
    name: string;
    paths: string[];
    limit: number;
    windowSeconds: number;
    shadow: boolean;
    used: number;
    remaining: number;
    retryAfterSeconds: number;
    resetSeconds: number;
  }>;
}

export interface IpLimiterOptions extends RememberRefusals {
  /** IPv6 addresses count per network of this many bits (default 64, the `ipv6Prefix` setting). */
  ipv6Prefix?: number;
}

/** Rules in order, each path pattern an exact path or a `prefix*`, resolved once rather than per request. */
export function compileIpRules(rules: readonly IpLimitRule[]): (path: string) => IpLimitRule | null {
  const patterns = rules.flatMap((rule) => rule.paths.map((p) => (p.endsWith('*') ? { rule, prefix: p.slice(0, -1), exact: null } : { rule, prefix: null, exact: p })));
  return (path) => {
    for (const p of patterns) {
      if (p.exact === null ? path.startsWith(p.prefix) : path === p.exact) return p.rule;
    }
    return null;
  };
}

export class IpLimiter {
  readonly match: (path: string) => IpLimitRule | null;
  /**
   * Refused (rule, address) pairs. The answer is only "refused until T": calls that leave the
   * window before T do not move T (the store's retry time is when the count falls below the
   * limit), so a refusal is kept until T whatever the count. A reload builds a new limiter.
   */
  private readonly refusals: RememberedRefusals<Kept>;
  private readonly ipv6Prefix: number;

  constructor(
    private readonly rules: readonly IpLimitRule[],
    private readonly store: LimitStore,
    private readonly clock: Clock,
    opts: IpLimiterOptions = {},
  ) {
    this.match = compileIpRules(rules);
    this.refusals = refusalsFor(opts);
    this.ipv6Prefix = opts.ipv6Prefix ?? DEFAULTS.ipv6Prefix;
  }

  /** Forgets every kept refusal (the store reconnected: it may have lost counts meanwhile). */
  forgetRefusals(): void {
    this.refusals.clear();
  }

  /** Forgets the refusals kept for an address bucket under every rule (its counts were reset, here or on another replica). */
  forget(bucket: string): void {
    for (const rule of this.rules) this.refusals.delete(`${bucketSubject(bucket)} ${rule.name}`);
  }

  /** The bucket `address` (any spelling) counts in, with its canonical text; null when it is no address. */
  bucketOf(address: string): { address: string; bucket: string } | null {
    const canonical = canonicalAddress(address);
    return canonical === null ? null : { address: canonical, bucket: addressBucket(canonical, this.ipv6Prefix) };
  }

  /** The state of an address's bucket under every rule, counting nothing. `address` must be one (bucketOf). */
  async state(address: string): Promise<IpLimitsState> {
    const at = this.bucketOf(address)!;
    const now = this.clock.now();
    const states = await this.store.inspect(this.checks(at.bucket), now);
    return {
      ...at,
      rules: this.rules.map((r, i) => {
        const s = states[i]!;
        return {
          name: r.name,
          paths: [...r.paths],
          limit: r.limit,
          windowSeconds: r.windowSeconds,
          shadow: r.shadow,
          used: s.used,
          remaining: Math.max(0, r.limit - s.used),
          retryAfterSeconds: resetSeconds(s.retryAfterMs),
          resetSeconds: resetSeconds(s.resetMs),
        };
      }),
    };
  }

  /**
   * An operator's reset of an address's bucket under every rule, for every replica (each then
   * forgets the refusals it keeps for the bucket); answers the state after.
   */
  async reset(address: string): Promise<IpLimitsState> {
    const { bucket } = this.bucketOf(address)!;
    await this.store.resetLimits(bucketSubject(bucket), this.checks(bucket), this.clock.now());
    this.forget(bucket);
    return this.state(address);
  }

  private checks(bucket: string): WindowCheck[] {
    const subject = bucketSubject(bucket);
    return this.rules.map((r) => ({ kind: 'window', subject, key: r.name, limit: r.limit, windowMs: r.windowSeconds * 1000 }));
  }

  /** `ip` is the client's address in any spelling; it is counted in its bucket. */
  async admit(rule: IpLimitRule, ip: string): Promise<IpVerdict> {
    const now = this.clock.now();
    const subject = bucketSubject(addressBucket(ip, this.ipv6Prefix));
    // Refusals are kept per (bucket, rule); a rule's name is unique among the rules.
    const refusal = `${subject} ${rule.name}`;
    const kept = this.refusals.get(refusal, now);
    // A kept refusal's `until` is the store's retry time itself (RememberedRefusals caps only how long it is kept).
    if (kept !== undefined) return { admitted: false, retryAfterSeconds: retryAfterSeconds(kept.until - now), remembered: true };
    const check = { kind: 'window', subject, key: rule.name, limit: rule.limit, windowMs: rule.windowSeconds * 1000 } as const;
    const d = await this.store.consume([check], now, nextMember(), ipRuleLimit(rule.name));
    if (d.admitted) return { admitted: true };
    // A refusal taken by this replica alone during an outage is not the shared state: not kept.
    if (d.degraded !== true) this.refusals.keep(refusal, { until: now + d.retryAfterMs }, now);
    return { admitted: false, retryAfterSeconds: retryAfterSeconds(d.retryAfterMs) };
  }
}
