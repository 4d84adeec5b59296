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
    freeTier: new FreeTierLimiter(config.freeTier, limits, clock, { rememberRefusalsMs: config.limits.rememberRefusalsSeconds * 1000 }),
    ipLimiter: new IpLimiter(config.ipLimits, limits, clock, { rememberRefusalsMs: config.limits.rememberRefusalsSeconds * 1000 }),
    trustedProxies: config.trustedProxies.length ? trustedProxyList(config.trustedProxies) : null,
  };
}

/**
 * Settings that only take effect at start-up (listeners, the relay URL, the
 * Redis connection, the admin token): a reload keeps their running values and
 * names the ones it ignored; everything else comes from the new file.
 */
export function applyReload(running: Config, next: Config): { config: Config; ignored: string[] } {
  const startupOnly = {
    'upstream.url': [running.upstream.url.href, next.upstream.url.href],
    redis: [JSON.stringify(running.redis), JSON.stringify(next.redis)],
    'host/port': [`${running.host}:${running.port}`, `${next.host}:${next.port}`],
    'adminHost/adminPort': [`${running.adminHost}:${running.adminPort}`, `${next.adminHost}:${next.adminPort}`],
  };
  const ignored = Object.entries(startupOnly)
    .filter(([, [a, b]]) => a !== b)
    .map(([k]) => k);
  const { redis, host, port, adminHost, adminPort, adminToken } = running;
  return {
    config: { ...next, upstream: { ...next.upstream, url: running.upstream.url }, redis, host, port, adminHost, adminPort, adminToken },
    ignored,
  };
}
