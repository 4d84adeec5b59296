/**
 * An operator's reset of one subject's limits (a support desk's "unblock"): its counts deleted and
 * the reset announced to every replica (change-feed.ts), in one transaction. Every count of a
 * subject shares its hash tag (src/store/limit-key.ts): on a Cluster the keys are in one slot.
 */
import { limitKey } from '../limit-key.js';
import type { LimitCheck } from '../types.js';
import type { RedisConnection } from './connection.js';

export class LimitResets {
  constructor(
    private readonly client: RedisConnection,
    private readonly prefix: string,
    /** The channel resets are announced on. */
    private readonly channel: string,
  ) {}

  async reset(subject: string, checks: readonly LimitCheck[]): Promise<void> {
    const keys = checks.map((c) => this.prefix + limitKey(c));
    const tx = this.client.multi();
    if (keys.length > 0) tx.del(...keys);
    tx.publish(this.channel, subject);
    const replies = await tx.exec();
    // A queued command that failed fails the reset (exec answers per command; null: aborted).
    if (replies === null) throw new Error('the reset transaction was aborted');
    for (const [err] of replies) if (err) throw err;
  }
}
