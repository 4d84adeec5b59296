/**
 * The key registry in Redis: a hash per key (by the SHA-256 of its body), an id → hash string,
 * and a set of ids per user, all under one hash tag (`{keys}`) so the scripts that create and
 * delete a key touch one Cluster slot. Creation and deletion announce themselves on the change
 * channel (change-feed.ts) in the same script, so every replica hears of them.
 */
import type { KeyRecord } from '../types.js';
import type { RedisConnection } from './connection.js';

export class KeyRegistry {
  /** Prefix of every registry key. */
  private readonly at: string;

  constructor(
    private readonly client: RedisConnection,
    prefix: string,
    /** The channel creations and deletions are announced on. */
    private readonly channel: string,
  ) {
    this.at = `${prefix}{keys}:`;
  }

  async create(rec: KeyRecord): Promise<boolean> {
    const r = await this.client.sluiceCreateKey(
      3,
      `${this.at}h:${rec.hash}`,
      `${this.at}id:${rec.id}`,
      `${this.at}u:${rec.user}`,
      rec.id,
      rec.user,
      rec.name,
      rec.createdAt,
      rec.hash,
      this.channel,
    );
    return r === 1;
  }

  async findByHash(hash: string): Promise<KeyRecord | null> {
    const h = await this.client.hgetall(`${this.at}h:${hash}`);
    return toRecord(h);
  }

  async delete(id: string): Promise<KeyRecord | null> {
    const flat = await this.client.sluiceDeleteKey(1, `${this.at}id:${id}`, this.at, this.channel);
    if (!flat) return null;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
    return toRecord(h);
  }

  async list(user: string): Promise<KeyRecord[]> {
    const ids = await this.client.smembers(`${this.at}u:${user}`);
    if (ids.length === 0) return [];
    const hashes = await this.client.mget(ids.map((id) => `${this.at}id:${id}`));
    const recs = await Promise.all(hashes.map((h) => (h ? this.findByHash(h) : Promise.resolve(null))));
    return recs
      .filter((r): r is KeyRecord => r !== null && r.user === user)
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }
}

function toRecord(h: Record<string, string> | null): KeyRecord | null {
  if (!h?.id || !h.hash || h.user === undefined) return null;
  return { id: h.id, user: h.user, name: h.name ?? '', createdAt: h.createdAt ?? '', hash: h.hash };
}
