/**
 * Everything a request decision depends on that the config file can change.
 * A reload builds a new Policy and swaps one reference, so each request sees
 * one consistent config from start to end.
 */
import type { BlockList } from 'node:net';
import type { Clock } from '../runtime/clock.js';
import { trustedProxyList, type Config } from '../config/index.js';
import { STARTUP_ONLY } from '../config/schema.js';
import { FreeTierLimiter } from './free-tier.js';
import type { LimitsReset } from '../store/types.js';
import type { LimitStore } from './guard.js';
import { IpLimiter } from './ip.js';

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
  } else if (e.subject.startsWith('u:')) {
    p.freeTier.forget(e.subject.slice('u:'.length));
  } else if (e.subject.startsWith('ip:')) {
    p.ipLimiter.forget(e.subject.slice('ip:'.length));
  }
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

type Tree = Record<string, unknown>;

function at(c: Config, path: readonly string[]): unknown {
  let v: unknown = c;
  for (const k of path) v = (v as Tree)[k];
  return v;
}

/** `into` with the value at `path` taken from `from`, copying only the objects on the way. */
function keep(into: Tree, from: Tree, path: readonly string[]): Tree {
  const [k, ...rest] = path as [string, ...string[]];
  return { ...into, [k]: rest.length === 0 ? from[k] : keep(into[k] as Tree, from[k] as Tree, rest) };
}

/**
 * The config a reload puts in force: everything from the new file but the start-up-only
 * settings of the schema (src/config/schema.ts), which keep their running values; `ignored`
 * names those the file tried to change. A secret (the admin token) is kept without being named.
 */
export function applyReload(running: Config, next: Config): { config: Config; ignored: string[] } {
  let config = next;
  const ignored: string[] = [];
  for (const s of STARTUP_ONLY) {
    const path = s.configPath.split('.');
    if (!s.secret && JSON.stringify(at(running, path)) !== JSON.stringify(at(next, path))) ignored.push(s.path);
    config = keep(config as unknown as Tree, running as unknown as Tree, path) as unknown as Config;
  }
  return { config, ignored };
}
