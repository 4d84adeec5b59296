/**
 * The Redis layout docs/upgrading.md promises: during a rolling upgrade or a rollback two versions
 * share one Redis, and each reads what the other wrote only while the key names, types and
 * encodings stay as they are. This writes through a real sluice (a key made with the admin API, a
 * free-model call, a per-IP-limited query) and reads back every key under its prefix. A change
 * here is a change of docs/upgrading.md's "Redis keys across versions" and a CHANGELOG entry.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ManualClock, startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';

const NOW = Date.UTC(2026, 2, 10, 4, 0, 0); // 12:00 on 2026-03-10 in Beijing
const END_OF_DAY = Date.UTC(2026, 2, 10, 16, 0, 0); // 00:00 on 2026-03-11 in Beijing
const MEMBER = /^[A-Za-z0-9_-]{8}:[0-9a-z]+$/; // <replica>:<sequence, base 36>

describe('the Redis layout a previous version reads', () => {
  const prefix = uniquePrefix('layout');
  let h: Harness;
  let redis: Redis;
  beforeAll(async () => {
    h = await startHarness({ store: 'redis', prefix, clock: new ManualClock(NOW) });
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await h?.close();
    redis?.disconnect();
  });

  it('keeps keys, free-tier and per-IP counts under the names, types and encodings of docs/upgrading.md', async () => {
    const { id, key } = await h.createKey('layout-user', { name: 'laptop' });
    const auth = { authorization: `Bearer ${key}` };
    const chat = await request(h.url, 'POST', '/v1/chat/completions', { headers: { ...auth, 'content-type': 'application/json' }, body: '{"model":"vend-flash-free"}' });
    expect(chat.status).toBe(200);
    expect((await request(h.url, 'GET', '/api/log/token', { headers: auth })).status).toBe(200);

    const names = (await redis.keys(`${prefix}*`)).map((k) => k.slice(prefix.length)).sort();
    const hash = createHash('sha256').update(key.slice('sk-'.length)).digest('hex');
    expect(names).toEqual(
      [`{ip:127.0.0.1}:usage-query`, `{keys}:h:${hash}`, `{keys}:id:${id}`, `{keys}:u:layout-user`, `{u:layout-user}:ft:d:2026-03-10`, `{u:layout-user}:ft:w`].sort(),
    );
    const at = (name: string): string => `${prefix}${name}`;

    // The key registry: a hash by the key's SHA-256, the id pointing at it, the user's set of ids.
    expect(await redis.type(at(`{keys}:h:${hash}`))).toBe('hash');
    expect(await redis.hgetall(at(`{keys}:h:${hash}`))).toEqual({ id, user: 'layout-user', name: 'laptop', createdAt: expect.any(String) as string, hash });
    expect(await redis.get(at(`{keys}:id:${id}`))).toBe(hash);
    expect(await redis.smembers(at('{keys}:u:layout-user'))).toEqual([id]);

    // The rolling minute and a per-IP window: a sorted set of admission times (ms), one unique member each.
    for (const w of ['{u:layout-user}:ft:w', '{ip:127.0.0.1}:usage-query']) {
      expect(await redis.type(at(w)), w).toBe('zset');
      const [member, score] = await redis.zrange(at(w), 0, -1, 'WITHSCORES');
      expect(member).toMatch(MEMBER);
      expect(Number(score)).toBe(NOW);
    }
    // The day: a counter named by the Beijing date, kept until 27 h past the day's end.
    expect(await redis.type(at('{u:layout-user}:ft:d:2026-03-10'))).toBe('string');
    expect(await redis.get(at('{u:layout-user}:ft:d:2026-03-10'))).toBe('1');
    const ttl = await redis.pttl(at('{u:layout-user}:ft:d:2026-03-10'));
    expect(ttl).toBeGreaterThan(END_OF_DAY - NOW + 27 * 3_600_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(END_OF_DAY - NOW + 27 * 3_600_000);
  });
});
