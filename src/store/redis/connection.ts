/**
 * Connecting to Redis: a single server, Sentinel or Cluster, from sluice's `redis` settings.
 * Commands fail fast instead of queueing (no offline queue, no retries, a short command timeout)
 * so a Redis outage can never hang a request; reconnection goes on in the background.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { DEFAULTS, type RedisConfig } from '../../config/index.js';

export type RedisConnection = Redis | Cluster;

export interface RedisStoreOptions {
  url: string;
  /** Prefix of every key and channel, so several deployments (or test files) can share one Redis. */
  keyPrefix?: string;
  /** Bound on one command, in ms; past it the call fails rather than waits. */
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Redis Sentinel: the URL then supplies only credentials, TLS and database. */
  sentinels?: { addresses: string[]; name: string };
  /** Redis Cluster seed nodes: the URL then supplies only credentials and TLS. */
  clusterNodes?: string[];
  /** Decisions of one event-loop turn as one script run (default true; never on a Cluster). */
  batchDecisions?: boolean;
  /** Extra ioredis options. */
  redisOptions?: RedisOptions;
}

/** The store options a config's `redis` section describes (the server and the CLI alike). */
export function redisStoreOptions(r: RedisConfig, url: string): RedisStoreOptions {
  return {
    url,
    keyPrefix: r.keyPrefix,
    commandTimeoutMs: r.commandTimeoutMs,
    ...(r.sentinels && r.sentinelName ? { sentinels: { addresses: r.sentinels, name: r.sentinelName } } : {}),
    ...(r.clusterNodes ? { clusterNodes: r.clusterNodes } : {}),
    batchDecisions: r.batchDecisions,
  };
}

function hostPort(hp: string): { host: string; port: number } {
  const i = hp.lastIndexOf(':');
  return { host: hp.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(hp.slice(i + 1)) };
}

/** Credentials, TLS and database from a redis:// or rediss:// URL. */
function urlOptions(url: string): RedisOptions {
  const u = new URL(url);
  const o: RedisOptions = {};
  if (u.username) o.username = decodeURIComponent(u.username);
  if (u.password) o.password = decodeURIComponent(u.password);
  const db = u.pathname.replace('/', '');
  if (db) o.db = Number(db);
  if (u.protocol === 'rediss:') o.tls = {};
  return o;
}

/** Keep trying to reconnect in the background, backing off to every 2 s, never blocking callers. */
const reconnectDelay = (times: number): number => Math.min(50 * 2 ** Math.min(times, 6), 2000);

/** The options every connection of one store shares. */
export function baseOptions(opts: RedisStoreOptions): RedisOptions {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Limit decisions are independent, and ioredis's auto-pipelining merges writes only within
    // one tick (under HTTP load, one request): with it ioredis made fewer decisions a second, at
    // more CPU (docs/performance.md).
    enableAutoPipelining: false,
    commandTimeout: opts.commandTimeoutMs ?? DEFAULTS.redis.commandTimeoutMs,
    connectTimeout: opts.connectTimeoutMs ?? 2000,
    retryStrategy: reconnectDelay,
    lazyConnect: false,
    ...opts.redisOptions,
  };
}

/** One connection with options `o`, to the server, Sentinel set or Cluster `opts` names. */
export function connect(opts: RedisStoreOptions, o: RedisOptions): RedisConnection {
  if (opts.clusterNodes) {
    const { enableOfflineQueue, ...nodeOpts } = o;
    const clusterOpts: ClusterOptions = {
      enableOfflineQueue,
      enableAutoPipelining: o.enableAutoPipelining,
      maxRedirections: 4,
      clusterRetryStrategy: reconnectDelay,
      redisOptions: { ...urlOptions(opts.url), ...nodeOpts },
      scripts: o.scripts,
    };
    return new Cluster(opts.clusterNodes.map(hostPort), clusterOpts);
  }
  if (opts.sentinels) {
    return new Redis({
      ...urlOptions(opts.url),
      ...o,
      sentinels: opts.sentinels.addresses.map(hostPort),
      name: opts.sentinels.name,
      // Learn of a failover from Sentinel at once instead of after errors.
      failoverDetector: true,
    });
  }
  return new Redis(opts.url, o);
}
