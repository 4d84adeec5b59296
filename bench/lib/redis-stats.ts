/** Counts commands the bench's own Redis executed (INFO commandstats), to prove what touches it. */
import { Redis } from 'ioredis';

export type CommandCounts = Record<string, number>;

/** Commands only sluice's Lua scripts (src/store/redis/lua/) run. */
const SCRIPT_INNER = new Set(['zremrangebyscore', 'zcard', 'zrange', 'zadd', 'pexpire', 'get', 'incr', 'zcount', 'zrangebyscore']);

export class RedisCounter {
  private readonly client: Redis;
  constructor(url: string) {
    this.client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  }

  async counts(): Promise<CommandCounts> {
    if (this.client.status === 'wait') await this.client.connect();
    const info = await this.client.info('commandstats');
    const out: CommandCounts = {};
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
    return out;
  }

  /** Commands run between two snapshots, excluding the INFO calls of this counter. */
  static diff(before: CommandCounts, after: CommandCounts): CommandCounts {
    const out: CommandCounts = {};
    for (const [k, v] of Object.entries(after)) {
      const d = v - (before[k] ?? 0) - (k === 'info' ? 1 : 0);
      if (d > 0) out[k] = d;
    }
    return out;
  }

  /**
   * Commands a client sent (round trips, give or take pipelining): commandstats also counts the
   * commands a Lua script runs, so those of sluice's limit scripts are left out.
   */
  static clientCommands(c: CommandCounts): number {
    let n = 0;
    for (const [k, v] of Object.entries(c)) if (!SCRIPT_INNER.has(k)) n += v;
    return n;
  }

  /** EVAL/EVALSHA calls: limit script runs (each carries the decisions of one event-loop turn). */
  static scriptCalls(c: CommandCounts): number {
    return (c.evalsha ?? 0) + (c.eval ?? 0) + (c.evalsha_ro ?? 0) + (c.eval_ro ?? 0);
  }

  close(): void {
    this.client.disconnect();
  }
}
