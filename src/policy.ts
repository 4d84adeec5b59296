/**
 * Everything a request decision depends on that the config file can change.
 * A reload builds a new Policy and swaps one reference, so each request sees
 * one consistent config from start to end.
 */
import type { BlockList } from 'node:net';
import type { Clock } from './clock.js';
import { trustedProxyList, type Config } from './config.js';
import { FreeTierLimiter } from './limits/free-tier.js';
import type { LimitStore } from './limits/guard.js';
import { IpLimiter } from './limits/ip.js';

export interface Policy {
  readonly config: Config;
  readonly freeTier: FreeTierLimiter;
  readonly ipLimiter: IpLimiter;
  readonly trustedProxies: BlockList | null;
}

export function buildPolicy(config: Config, limits: LimitStore, clock: Clock): Policy {
  return {
    config,
    freeTier: new FreeTierLimiter(config.freeTier, limits, clock),
    ipLimiter: new IpLimiter(config.ipLimits, limits, clock),
    trustedProxies: config.trustedProxies.length ? trustedProxyList(config.trustedProxies) : null,
  };
}

/** Settings that only take effect at start-up; a reload that changes them is logged, not applied. */
export function restartOnlyChanges(a: Config, b: Config): string[] {
  const out: string[] = [];
  if (a.upstream.url.href !== b.upstream.url.href) out.push('upstream.url');
  if (a.redisUrl !== b.redisUrl || JSON.stringify(a.redis) !== JSON.stringify(b.redis)) out.push('redis');
  if (a.host !== b.host || a.port !== b.port) out.push('host/port');
  if (a.adminHost !== b.adminHost || a.adminPort !== b.adminPort) out.push('adminHost/adminPort');
  return out;
}
