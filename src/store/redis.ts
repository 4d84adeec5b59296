/**
 * The shared store: every replica on one Redis behaves as one. Commands fail
 * fast instead of queueing (no offline queue, no retries, a short command
 * timeout) so a Redis outage can never hang a request; the caller decides
 * what an error means.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { DEFAULTS, type RedisConfig } from '../config.js';
import { CONSUME_LUA, CREATE_KEY_LUA, DELETE_KEY_LUA, INSPECT_LUA } from './scripts.js';
import type { Decision, KeyChange, KeyRecord, LimitCheck, LimitState, Store } from './types.js';

type ScriptResult = Array<number | string>;

/** Decisions per script run: a run blocks Redis while it lasts (11-12 µs of script time a decision). */
const MAX_BATCH = 64;

interface PendingDecision {
  checks: readonly LimitCheck[];
  nowMs: number;
  member: string;
  resolve(d: Decision): void;
  reject(err: unknown): void;
}

interface ScriptCommands {
  sluiceConsume(numKeys: number, ...args: Array<string | number>): Promise<ScriptResult>;
  sluiceInspect(numKeys: number, ...args: Array<string | number>): Promise<ScriptResult>;
  sluiceCreateKey(numKeys: number, ...args: Array<string | number>): Promise<number>;
  sluiceDeleteKey(numKeys: number, ...args: Array<string | number>): Promise<string[] | null>;
}

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

export class RedisStore implements Store {
  readonly kind = 'redis' as const;
  readonly client: Redis | Cluster;
  private readonly sub: Redis | Cluster;
  private readonly scripts: ScriptCommands;
  private readonly prefix: string;
  private readonly registry: string;
  private readonly channel: string;
  private readonly listeners: Array<(c: KeyChange) => void> = [];
  private subscribedOnce = false;
  private readonly reconnectListeners: Array<() => void> = [];
  private readyOnce = false;
  private closed = false;
  /**
   * Decisions per script run: MAX_BATCH, or 1 on a Cluster (a script runs on one slot, and users
   * spread over slots) and behind a sharding proxy (`batchDecisions: false`).
   */
  private readonly perRun: number;

  constructor(opts: RedisStoreOptions) {
    this.prefix = opts.keyPrefix ?? DEFAULTS.redis.keyPrefix;
    this.registry = `${this.prefix}{keys}:`;
    this.channel = `${this.prefix}keys:changed`;
    const base: RedisOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Measured (bench/tools/redis-consume.ts): without auto-pipelining ioredis made 29-35k
      // decisions/s against 18-20k with it, at ~20 % less CPU; limit decisions are independent.
      enableAutoPipelining: false,
      commandTimeout: opts.commandTimeoutMs ?? DEFAULTS.redis.commandTimeoutMs,
      connectTimeout: opts.connectTimeoutMs ?? 2000,
      // Keep trying to reconnect in the background, never block callers.
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
      lazyConnect: false,
      ...opts.redisOptions,
    };
    const scripts = {
      sluiceConsume: { lua: CONSUME_LUA },
      sluiceInspect: { lua: INSPECT_LUA, readOnly: true },
      sluiceCreateKey: { lua: CREATE_KEY_LUA },
      sluiceDeleteKey: { lua: DELETE_KEY_LUA },
    };
    const connect = (o: RedisOptions): Redis | Cluster => {
      if (opts.clusterNodes) {
        const { enableOfflineQueue, ...nodeOpts } = o;
        const clusterOpts: ClusterOptions = {
          enableOfflineQueue,
          enableAutoPipelining: o.enableAutoPipelining,
          maxRedirections: 4,
          clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
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
    };
    this.client = connect({ ...base, scripts });
    this.perRun = this.client instanceof Redis && opts.batchDecisions !== false ? MAX_BATCH : 1;
    this.scripts = this.client as unknown as ScriptCommands;
    // Errors surface through the commands that fail; the connection's own
    // 'error' events would otherwise crash the process.
    this.client.on('error', () => {});
    this.client.on('ready', () => {
      if (this.readyOnce) for (const l of this.reconnectListeners) l();
      this.readyOnce = true;
    });

    // Pub/sub needs its own connection. Messages sent while it was away are
    // lost, so every (re)subscription flushes the caches that listen.
    this.sub = connect({ ...base, enableOfflineQueue: true, commandTimeout: undefined, enableAutoPipelining: false });
    this.sub.on('error', () => {});
    this.sub.on('ready', () => {
      if (this.subscribedOnce) this.emit({ type: 'flush' });
      this.subscribedOnce = true;
    });
    this.sub.subscribe(this.channel).catch(() => {});
    this.sub.on('message', (_ch: string, msg: string) => {
      const i = msg.indexOf(':');
      const type = msg.slice(0, i);
      const hash = msg.slice(i + 1);
      if (type === 'deleted' || type === 'created') this.emit({ type, hash });
    });
  }

  /** Resolves once the command connection is ready (or rejects after `timeoutMs`). */
  async waitReady(timeoutMs = 5000): Promise<void> {
    if (this.client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => {
        cleanup();
        reject(new Error(`Redis not ready after ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = (): void => {
        cleanup();
        resolve();
      };
      const cleanup = (): void => {
        clearTimeout(t);
        this.client.off('ready', onReady);
      };
      this.client.on('ready', onReady);
    });
  }

  private emit(c: KeyChange): void {
    for (const l of this.listeners) l(c);
  }

  onKeyChange(listener: (change: KeyChange) => void): void {
    this.listeners.push(listener);
  }

  onReconnect(listener: () => void): void {
    this.reconnectListeners.push(listener);
  }

  async createKey(rec: KeyRecord): Promise<boolean> {
    const r = await this.scripts.sluiceCreateKey(
      3,
      `${this.registry}h:${rec.hash}`,
      `${this.registry}id:${rec.id}`,
      `${this.registry}u:${rec.user}`,
      rec.id,
      rec.user,
      rec.name,
      rec.createdAt,
      rec.hash,
      this.channel,
    );
    return r === 1;
  }

  async findKeyByHash(hash: string): Promise<KeyRecord | null> {
    const h = await this.client.hgetall(`${this.registry}h:${hash}`);
    return toRecord(h);
  }

  async deleteKey(id: string): Promise<KeyRecord | null> {
    const flat = await this.scripts.sluiceDeleteKey(1, `${this.registry}id:${id}`, this.registry, this.channel);
    if (!flat) return null;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
    return toRecord(h);
  }

  async listKeys(user: string): Promise<KeyRecord[]> {
    const ids = await this.client.smembers(`${this.registry}u:${user}`);
    if (ids.length === 0) return [];
    const hashes = await this.client.mget(ids.map((id) => `${this.registry}id:${id}`));
    const recs = await Promise.all(hashes.map((h) => (h ? this.findKeyByHash(h) : Promise.resolve(null))));
    return recs
      .filter((r): r is KeyRecord => r !== null && r.user === user)
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }

  /** Appends checks as the scripts take them: each key to KEYS, a ('w' | 'c', limit, param) triple to ARGV. */
  private pushChecks(checks: readonly LimitCheck[], keys: string[], args: Array<string | number>): void {
    for (const c of checks) {
      keys.push(this.prefix + c.key);
      if (c.kind === 'window') args.push('w', c.limit, c.windowMs);
      else args.push('c', c.limit, c.resetAtMs);
    }
  }

  /** Decisions asked for in this turn of the event loop, waiting for `flush`. */
  private batch: PendingDecision[] | null = null;

  /**
   * Decisions asked for in one turn of the event loop are sent together when it ends: on a busy
   * sidecar a command costs more than the decision it carries (ioredis builds it and parses its
   * reply, Redis reads it and sets up a script run), so they go as one script run per batch.
   * The batch leaves at `setImmediate`, once the turn's ready callbacks have run (microseconds),
   * never after a timer. ioredis's own auto-pipelining merges writes only within one tick, which
   * under HTTP load is one request, and costs more than it saves.
   */
  consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      if (this.batch === null) {
        this.batch = [];
        setImmediate(this.flush);
      }
      this.batch.push({ checks, nowMs, member, resolve, reject });
    });
  }

  /**
   * Sends the turn's decisions as runs of `perRun`, in one write on a single connection (a
   * Cluster writes to one connection per node, so there is nothing to hold). No run holds Redis
   * for long, and a run of one keeps its keys on one hash tag.
   */
  private readonly flush = (): void => {
    const batch = this.batch!;
    this.batch = null;
    const s = this.client instanceof Redis ? this.client.stream : undefined;
    s?.cork();
    try {
      for (let i = 0; i < batch.length; i += this.perRun) this.send(batch.slice(i, i + this.perRun));
    } finally {
      s?.uncork();
    }
  };

  private send(batch: readonly PendingDecision[]): void {
    const keys: string[] = [];
    const args: Array<string | number> = [batch.length];
    for (const d of batch) {
      args.push(d.nowMs, d.member, d.checks.length);
      this.pushChecks(d.checks, keys, args);
    }
    let sent: Promise<ScriptResult>;
    try {
      sent = this.scripts.sluiceConsume(keys.length, ...keys, ...args);
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      (r) => settle(batch, r),
      (err: unknown) => {
        for (const d of batch) d.reject(err);
      },
    );
  }

  async inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    const keys: string[] = [];
    const args: Array<string | number> = [nowMs];
    this.pushChecks(checks, keys, args);
    const r = await this.scripts.sluiceInspect(keys.length, ...keys, ...args);
    const out: LimitState[] = [];
    for (let i = 0; i < checks.length; i++) {
      out.push({ used: Number(r[i * 3]), retryAfterMs: Number(r[i * 3 + 1]), resetMs: Number(r[i * 3 + 2]) });
    }
    return out;
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.client.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.length = 0;
    this.reconnectListeners.length = 0;
    await Promise.allSettled([this.client.quit(), this.sub.quit()]);
    this.client.disconnect();
    this.sub.disconnect();
  }
}

/** Hands each decision of a batch its part of the script's reply. Never throws: a reply of the wrong shape fails the decisions it cannot answer. */
function settle(batch: readonly PendingDecision[], r: ScriptResult): void {
  if (!Array.isArray(r)) {
    for (const d of batch) d.reject(new Error('limit decision: unexpected reply from Redis'));
    return;
  }
  let at = 0;
  for (const d of batch) {
    const n = d.checks.length;
    const rejectedBy = Number(r[at]);
    const retry = r[at + 1];
    const used = r.slice(at + 2, at + 2 + n).map(Number);
    const resetMs = r.slice(at + 2 + n, at + 2 + 2 * n).map(Number);
    at += 2 + 2 * n;
    if (rejectedBy < 0) d.reject(new Error(`limit decision failed in Redis: ${String(retry)}`));
    else if (!Number.isInteger(rejectedBy) || resetMs.length !== n || rejectedBy > n) d.reject(new Error('limit decision: unexpected reply from Redis'));
    else if (rejectedBy === 0) d.resolve({ admitted: true, used, resetMs });
    else d.resolve({ admitted: false, rejectedBy: rejectedBy - 1, retryAfterMs: Number(retry), used, resetMs });
  }
}

function toRecord(h: Record<string, string> | null): KeyRecord | null {
  if (!h || !h.id || !h.hash || h.user === undefined) return null;
  return { id: h.id, user: h.user, name: h.name ?? '', createdAt: h.createdAt ?? '', hash: h.hash };
}
