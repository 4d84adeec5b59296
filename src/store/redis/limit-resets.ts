/**
 * An operator's reset of one subject's limits (a support desk's "unblock"): its counts deleted, its
 * time kept, and the reset announced to every replica (change-feed.ts), in one transaction. Every
 * count of a subject shares its hash tag (src/store/limit-key.ts): on a Cluster the keys are in one
 * slot. The time is for a replica that was cut off from Redis meanwhile and never heard the
 * announcement: the calls it admitted in memory before the reset are not added when it replays
 * them (lua/replay.lua).
 */
import { MAX_WINDOW_SECONDS } from '../../config/schema.js';
import { limitKey, resetMarkKey } from '../limit-key.js';
import type { LimitCheck } from '../types.js';
import type { RedisConnection } from './connection.js';

/** How long a reset's time is kept: as long as a call admitted before it can count (the longest window, or its day), and a day more. */
const RESET_MARK_MS = (MAX_WINDOW_SECONDS + 86_400) * 1000;

export class LimitResets {
  constructor(
    private readonly client: RedisConnection,
    private readonly prefix: string,
    /** The channel resets are announced on. */
    private readonly channel: string,
  ) {}

  async reset(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void> {
    const keys = checks.map((c) => this.prefix + limitKey(c));
    const tx = this.client.multi();
    if (keys.length > 0) tx.del(...keys);
    // Kept as long as a call admitted before it may still wait to be replayed: its day, at most.
    tx.set(this.prefix + resetMarkKey(subject), String(nowMs), 'PX', RESET_MARK_MS);
    tx.publish(this.channel, subject);
    const replies = await tx.exec();
    // A queued command that failed fails the reset (exec answers per command; null: aborted).
    if (replies === null) throw new Error('the reset transaction was aborted');
    for (const [err] of replies) if (err) throw err;
  }
}
