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

export function matchIpRule(rules: readonly IpLimitRule[], path: string): IpLimitRule | null {
  for (const r of rules) {
    for (const p of r.paths) {
      if (p.endsWith('*') ? path.startsWith(p.slice(0, -1)) : path === p) return r;
    }
  }
  return null;
}

export class IpLimiter {
  constructor(
    readonly rules: readonly IpLimitRule[],
    private readonly store: LimitStore,
    private readonly clock: Clock,
  ) {}

  match(path: string): IpLimitRule | null {
    return matchIpRule(this.rules, path);
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
