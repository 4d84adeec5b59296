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
  const remember = { rememberRefusalsMs: config.limits.rememberRefusalsSeconds * 1000 };
  return {
    config,
    freeTier: new FreeTierLimiter(config.freeTier, limits, clock, remember),
    ipLimiter: new IpLimiter(config.ipLimits, limits, clock, remember),
    trustedProxies: config.trustedProxies.length ? trustedProxyList(config.trustedProxies) : null,
  };
}

/**
 * Settings that only take effect at start-up (listeners, the relay URL, the Redis connection),
 * each listed once: how a reload tells it changed (`read`) and how the running value is kept.
 */
const STARTUP_ONLY: ReadonlyArray<{ name: string; read: (c: Config) => string; keep: (c: Config, running: Config) => Config }> = [
  { name: 'upstream.url', read: (c) => c.upstream.url.href, keep: (c, r) => ({ ...c, upstream: { ...c.upstream, url: r.upstream.url } }) },
  { name: 'redis', read: (c) => JSON.stringify(c.redis), keep: (c, r) => ({ ...c, redis: r.redis }) },
  { name: 'relayDb', read: (c) => JSON.stringify(c.relayDb), keep: (c, r) => ({ ...c, relayDb: r.relayDb }) },
  { name: 'host/port', read: (c) => `${c.host}:${c.port}`, keep: (c, r) => ({ ...c, host: r.host, port: r.port }) },
  { name: 'adminHost/adminPort', read: (c) => `${c.adminHost}:${c.adminPort}`, keep: (c, r) => ({ ...c, adminHost: r.adminHost, adminPort: r.adminPort }) },
];

/**
 * The config a reload puts in force: everything from the new file but the start-up-only
 * settings, which keep their running values; `ignored` names those the file tried to change.
 */
export function applyReload(running: Config, next: Config): { config: Config; ignored: string[] } {
  // The admin token is read at start-up too; a secret, so it is kept without being named.
  let config: Config = { ...next, adminToken: running.adminToken };
  const ignored: string[] = [];
  for (const s of STARTUP_ONLY) {
    if (s.read(running) !== s.read(next)) ignored.push(s.name);
    config = s.keep(config, running);
  }
  return { config, ignored };
}
