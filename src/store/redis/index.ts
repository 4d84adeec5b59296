/**
 * The shared store: every replica on one Redis behaves as one. Its parts are in redis/: the
 * connection set-up (connection.ts), the limit decisions and their batcher (decisions.ts), the
 * key registry (registry.ts) and the feed of key changes between replicas (change-feed.ts).
 * A Redis outage never hangs a request: commands fail fast, and the caller decides what an error
 * means (src/limits/guard.ts for limits, the admin API answers 503 store_unavailable).
 */
import { DEFAULTS } from '../../config/index.js';
import { ChangeFeed } from './change-feed.js';
import { baseOptions, connect, type RedisConnection, type RedisStoreOptions } from './connection.js';
import { RedisDecisions } from './decisions.js';
import { LimitResets } from './limit-resets.js';
import { KeyRegistry } from './registry.js';
import { RedisReplay } from './replay.js';
import { SCRIPTS } from './scripts.js';
import type { Decision, KeyChange, KeyRecord, LimitCheck, LimitsReset, LimitState, OutageAdmission, ReplayOutcome, Store } from '../types.js';

export { redisStoreOptions, type RedisStoreOptions } from './connection.js';

/** How long the first health probe waits for the first connection (ioredis's connect timeout). */
const FIRST_CONNECT_WAIT_MS = 2000;

export class RedisStore implements Store {
  readonly kind = 'redis' as const;
  /** The command connection (limits and keys). */
  readonly client: RedisConnection;
  /** The key-change feed's own connection (pub/sub takes a connection over). */
  private readonly sub: RedisConnection;
  private readonly decisions: RedisDecisions;
  private readonly replays: RedisReplay;
  private readonly registry: KeyRegistry;
  private readonly resets: LimitResets;
  private readonly changes: ChangeFeed;
  private readonly reconnectListeners: Array<() => void> = [];
  private readyOnce = false;
  /** The connection's last error since it was last ready. */
  private connectionError: string | null = null;
  private closed = false;

  constructor(opts: RedisStoreOptions) {
    const prefix = opts.keyPrefix ?? DEFAULTS.redis.keyPrefix;
    const channel = `${prefix}keys:changed`;
    const resetChannel = `${prefix}limits:reset`;
    const base = baseOptions(opts);
    this.client = connect(opts, { ...base, scripts: SCRIPTS });
    this.decisions = new RedisDecisions(this.client, prefix, opts.batchDecisions !== false);
    this.replays = new RedisReplay(this.client, prefix, opts.batchDecisions !== false);
    this.registry = new KeyRegistry(this.client, prefix, channel);
    this.resets = new LimitResets(this.client, prefix, resetChannel);
    // Errors surface through the commands that fail; the connection's own
    // 'error' events would otherwise crash the process. The last one says why a command found no
    // connection (ioredis only says the stream is not writeable).
    this.client.on('error', (err: Error) => {
      this.connectionError = err.message;
    });
    this.client.on('ready', () => {
      // Ready after a break, or for the first time after failing to connect at start-up: either
      // way the replica may have decided calls on its own meanwhile.
      const broke = this.readyOnce || this.connectionError !== null;
      this.connectionError = null;
      this.readyOnce = true;
      if (broke) for (const l of this.reconnectListeners) l();
    });
    this.sub = connect(opts, { ...base, enableOfflineQueue: true, commandTimeout: undefined, enableAutoPipelining: false });
    this.changes = new ChangeFeed(this.sub, { keys: channel, limits: resetChannel });
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

  onKeyChange(listener: (change: KeyChange) => void): void {
    this.changes.onKeyChange(listener);
  }

  onLimitsReset(listener: (e: LimitsReset) => void): void {
    this.changes.onLimitsReset(listener);
  }

  resetLimits(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void> {
    return this.resets.reset(subject, checks, nowMs);
  }

  onReconnect(listener: () => void): void {
    this.reconnectListeners.push(listener);
  }

  createKey(rec: KeyRecord): Promise<boolean> {
    return this.registry.create(rec);
  }

  findKeyByHash(hash: string): Promise<KeyRecord | null> {
    return this.registry.findByHash(hash);
  }

  deleteKey(id: string): Promise<KeyRecord | null> {
    return this.registry.delete(id);
  }

  listKeys(user: string): Promise<KeyRecord[]> {
    return this.registry.list(user);
  }

  consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision> {
    return this.decisions.consume(checks, nowMs, member);
  }

  inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    return this.decisions.inspect(checks, nowMs);
  }

  replayAdmissions(admissions: readonly OutageAdmission[], nowMs: number): Promise<ReplayOutcome[]> {
    return this.replays.replay(admissions, nowMs);
  }

  async ping(): Promise<void> {
    // Still making its first connection: its outcome, not a failure nobody caused (a warning at
    // every start would teach operators to ignore it).
    if (!this.readyOnce && this.connectionError === null) await this.waitReady(FIRST_CONNECT_WAIT_MS).catch(() => {});
    if (this.client.status !== 'ready' && this.connectionError !== null) {
      // No connection: why, rather than ioredis's "Stream isn't writeable".
      throw new Error(`no connection to Redis (${this.client.status}): ${this.connectionError}`);
    }
    const reply = await this.client.ping();
    if (reply !== 'PONG') throw new Error(`unexpected reply to PING: ${String(reply).slice(0, 100)}`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.changes.stop();
    this.reconnectListeners.length = 0;
    await Promise.allSettled([this.client.quit(), this.sub.quit()]);
    this.client.disconnect();
    this.sub.disconnect();
  }
}
