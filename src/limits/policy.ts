/**
 * Everything a request decision depends on that the config file can change.
 * A reload builds a new Policy and swaps one reference, so each request sees
 * one consistent config from start to end.
 */
import type { BlockList } from 'node:net';
import type { Clock } from '../runtime/clock.js';
import { trustedProxyList, type Config } from '../config/index.js';
import { FreeTierLimiter } from './free-tier.js';
import type { LimitsReset } from '../store/types.js';
import type { LimitStore } from './guard.js';
import { IpLimiter } from './ip.js';
import { subjectOwner } from './names.js';

export interface Policy {
  readonly config: Config;
  readonly freeTier: FreeTierLimiter;
  readonly ipLimiter: IpLimiter;
  readonly trustedProxies: BlockList | null;
}

/**
 * Forgets what this replica keeps of a subject whose limits an operator reset (here or on another
 * replica): the refusals the limiters remember. `flush`: every subject's.
 */
export function forgetSubject(p: Policy, e: LimitsReset): void {
  if (e.type === 'flush') {
    p.freeTier.forgetRefusals();
    p.ipLimiter.forgetRefusals();
    return;
  }
  const owner = subjectOwner(e.subject);
  if (owner === null) return;
  if ('user' in owner) p.freeTier.forget(owner.user);
  else p.ipLimiter.forget(owner.bucket);
}

export function buildPolicy(config: Config, limits: LimitStore, clock: Clock): Policy {
  const remember = { rememberRefusalsMs: config.limits.rememberRefusalsSeconds * 1000 };
  return {
    config,
    freeTier: new FreeTierLimiter(config.freeTier, limits, clock, remember),
    ipLimiter: new IpLimiter(config.ipLimits, limits, clock, { ...remember, ipv6Prefix: config.ipv6Prefix }),
    trustedProxies: config.trustedProxies.length ? trustedProxyList(config.trustedProxies) : null,
  };
}
