/**
 * Per-client-IP limits on the query endpoints (contract §8), counted before
 * authentication so that unauthenticated floods are limited too. Rules are
 * matched first-wins; each rule is one shared budget for all its paths. An address counts in its
 * bucket (src/http/address-bucket.ts): an IPv4 address, or the IPv6 network of `ipv6Prefix` bits.
 */
import { addressBucket, DEFAULT_IPV6_PREFIX } from '../http/address-bucket.js';
import type { Clock } from '../runtime/clock.js';
import type { IpLimitRule } from '../config/index.js';
import type { LimitStore } from './guard.js';
import { nextMember } from './member.js';
import { refusalsFor, type Kept, type RememberRefusals, type Refusals } from './refusals.js';
import { retryAfterSeconds } from './retry-after.js';

export type IpVerdict = { admitted: true } | { admitted: false; retryAfterSeconds: number };

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
  private readonly refusals: Refusals<Kept>;
  private readonly ipv6Prefix: number;

  constructor(
    rules: readonly IpLimitRule[],
    private readonly store: LimitStore,
    private readonly clock: Clock,
    opts: IpLimiterOptions = {},
  ) {
    this.match = compileIpRules(rules);
    this.refusals = refusalsFor(opts);
    this.ipv6Prefix = opts.ipv6Prefix ?? DEFAULT_IPV6_PREFIX;
  }

  /** Forgets every kept refusal (the store reconnected: it may have lost counts meanwhile). */
  forgetRefusals(): void {
    this.refusals.clear();
  }

  /** `ip` is the client's address in any spelling; it is counted in its bucket. */
  admit(rule: IpLimitRule, ip: string): IpVerdict | Promise<IpVerdict> {
    const now = this.clock.now();
    const subject = `ip:${addressBucket(ip, this.ipv6Prefix)}`;
    // Refusals are kept per (bucket, rule); a rule's name is unique among the rules.
    const refusal = `${subject} ${rule.name}`;
    const kept = this.refusals.get(refusal, now);
    // A kept refusal's `until` is the store's retry time itself (Refusals caps only how long it is kept).
    if (kept !== undefined) return { admitted: false, retryAfterSeconds: retryAfterSeconds(kept.until - now) };
    return this.ask(rule, subject, refusal, now);
  }

  private async ask(rule: IpLimitRule, subject: string, refusal: string, now: number): Promise<IpVerdict> {
    const check = { kind: 'window', subject, key: rule.name, limit: rule.limit, windowMs: rule.windowSeconds * 1000 } as const;
    const d = await this.store.consume([check], now, nextMember(), `ip:${rule.name}`);
    if (d.admitted) return { admitted: true };
    // A refusal taken by this replica alone during an outage is not the shared state: not kept.
    if (d.degraded !== true) this.refusals.keep(refusal, { until: now + d.retryAfterMs }, now);
    return { admitted: false, retryAfterSeconds: retryAfterSeconds(d.retryAfterMs) };
  }
}
