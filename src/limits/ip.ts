/**
 * Per-client-IP limits on the query endpoints (contract §8), counted before
 * authentication so that unauthenticated floods are limited too. Rules are
 * matched first-wins; each rule is one shared budget for all its paths.
 */
import type { Clock } from '../clock.js';
import type { IpLimitRule } from '../config.js';
import type { LimitStore } from './guard.js';
import { retryAfterSeconds } from './free-tier.js';
import { nextMember } from './member.js';

export type IpVerdict = { admitted: true } | { admitted: false; retryAfterSeconds: number };

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

  constructor(
    rules: readonly IpLimitRule[],
    private readonly store: LimitStore,
    private readonly clock: Clock,
  ) {
    this.match = compileIpRules(rules);
  }

  async admit(rule: IpLimitRule, ip: string): Promise<IpVerdict> {
    const now = this.clock.now();
    const d = await this.store.consume(
      [{ kind: 'window', key: `{ip:${ip}}:${rule.name}`, limit: rule.limit, windowMs: rule.windowSeconds * 1000 }],
      now,
      nextMember(),
      `ip:${rule.name}`,
    );
    return d.admitted ? { admitted: true } : { admitted: false, retryAfterSeconds: retryAfterSeconds(d.retryAfterMs) };
  }
}
