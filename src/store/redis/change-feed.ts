/**
 * Changes made by any replica that every replica must hear at once, on Redis channels: the key
 * set (so each replica's key cache drops a deleted key) and limit resets (so each forgets the
 * refusals it remembers of a subject whose counts an operator reset). Pub/sub needs its own
 * connection. Messages sent while it was away are lost, so every resubscription tells the
 * listeners to flush what they keep.
 */
import type { KeyChange, LimitsReset } from '../types.js';
import type { RedisConnection } from './connection.js';

export interface FeedChannels {
  /** `created:<hash>` / `deleted:<hash>` (the registry's scripts publish them). */
  keys: string;
  /** The subject whose limits were reset (`u:<user>`, `ip:<bucket>`). */
  limits: string;
}

export class ChangeFeed {
  private readonly keyListeners: Array<(c: KeyChange) => void> = [];
  private readonly limitListeners: Array<(e: LimitsReset) => void> = [];
  private subscribedOnce = false;

  constructor(
    /** A connection of its own, with an offline queue (it subscribes again on each reconnect). */
    sub: RedisConnection,
    channels: FeedChannels,
  ) {
    // Errors surface as a resubscription; the connection's own 'error' events would otherwise crash the process.
    sub.on('error', () => {});
    sub.on('ready', () => {
      if (this.subscribedOnce) {
        for (const l of this.keyListeners) l({ type: 'flush' });
        for (const l of this.limitListeners) l({ type: 'flush' });
      }
      this.subscribedOnce = true;
    });
    sub.subscribe(channels.keys, channels.limits).catch(() => {});
    sub.on('message', (ch: string, msg: string) => {
      if (ch === channels.limits) {
        for (const l of this.limitListeners) l({ type: 'reset', subject: msg });
        return;
      }
      const i = msg.indexOf(':');
      const type = msg.slice(0, i);
      const hash = msg.slice(i + 1);
      if (type === 'deleted' || type === 'created') for (const l of this.keyListeners) l({ type, hash });
    });
  }

  onKeyChange(listener: (change: KeyChange) => void): void {
    this.keyListeners.push(listener);
  }

  onLimitsReset(listener: (e: LimitsReset) => void): void {
    this.limitListeners.push(listener);
  }

  /** Stops telling listeners; the caller closes the connection. */
  stop(): void {
    this.keyListeners.length = 0;
    this.limitListeners.length = 0;
  }
}
