/**
 * Changes to the key set made by any replica, heard on a Redis channel so that each replica's
 * key cache drops a deleted key at once. Pub/sub needs its own connection. Messages sent while it
 * was away are lost, so every resubscription tells the listeners to flush what they cache.
 */
import type { KeyChange } from '../types.js';
import type { RedisConnection } from './connection.js';

export class KeyChangeFeed {
  private readonly listeners: Array<(c: KeyChange) => void> = [];
  private subscribedOnce = false;

  constructor(
    /** A connection of its own, with an offline queue (it subscribes again on each reconnect). */
    sub: RedisConnection,
    channel: string,
  ) {
    // Errors surface as a resubscription; the connection's own 'error' events would otherwise crash the process.
    sub.on('error', () => {});
    sub.on('ready', () => {
      if (this.subscribedOnce) this.emit({ type: 'flush' });
      this.subscribedOnce = true;
    });
    sub.subscribe(channel).catch(() => {});
    sub.on('message', (_ch: string, msg: string) => {
      const i = msg.indexOf(':');
      const type = msg.slice(0, i);
      const hash = msg.slice(i + 1);
      if (type === 'deleted' || type === 'created') this.emit({ type, hash });
    });
  }

  onChange(listener: (change: KeyChange) => void): void {
    this.listeners.push(listener);
  }

  private emit(c: KeyChange): void {
    for (const l of this.listeners) l(c);
  }

  /** Stops telling listeners; the caller closes the connection. */
  stop(): void {
    this.listeners.length = 0;
  }
}
