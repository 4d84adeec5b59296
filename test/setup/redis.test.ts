import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis, type RedisOptions } from 'ioredis';
import { flushTestDb, spawnRedis, uniquePrefix, type SpawnedRedis } from '../support/redis.js';
import { within } from '../support/time.js';

const clients: Redis[] = [];

function client(url: string, options: RedisOptions = {}): Redis {
  const c = new Redis(url, { maxRetriesPerRequest: 0, ...options });
  c.on('error', () => {
    /* outages are expected in these tests */
  });
  clients.push(c);
  return c;
}

/** A client that fails fast, as the spec for outage tests asks. */
const fastClient = (url: string): Redis => client(url, { commandTimeout: 100, maxRetriesPerRequest: 0 });

/** 'answered' | 'failed' | 'silent' (no outcome within 200 ms). */
async function within200ms(p: Promise<unknown>): Promise<string> {
  const outcome = p.then(
    () => 'answered',
    () => 'failed',
  );
  return (await within(200, outcome)) ?? 'silent';
}

afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

describe('shared Redis from globalSetup', () => {
  const url = inject('redisUrl');
  const prefix = uniquePrefix(import.meta.url);

  afterAll(async () => {
    await flushTestDb(url, prefix);
  });

  it('provides a URL that answers PING', async () => {
    expect(url).toMatch(/^rediss?:\/\//);
    expect(await client(url).ping()).toBe('PONG');
  });

  it('uniquePrefix differs per call and names the file', () => {
    const a = uniquePrefix('limiter.test.ts');
    const b = uniquePrefix('limiter.test.ts');
    expect(a).not.toBe(b);
    expect(a.startsWith('t:limiter:')).toBe(true);
    expect(prefix.startsWith('t:redis:')).toBe(true);
  });

  it('flushTestDb with a prefix deletes only that prefix', async () => {
    const c = client(url);
    const other = uniquePrefix('other');
    await c.set(`${prefix}a`, '1');
    await c.set(`${prefix}b*[x]`, '1'); // glob characters in the key must not matter
    await c.set(`${other}keep`, '1');
    expect(await flushTestDb(url, prefix)).toBe(2);
    expect(await c.exists(`${prefix}a`, `${prefix}b*[x]`)).toBe(0);
    expect(await c.get(`${other}keep`)).toBe('1');
    await flushTestDb(url, other);
  });
});

describe('spawnRedis', () => {
  let redis: SpawnedRedis;

  beforeAll(async () => {
    redis = await spawnRedis();
  });

  afterAll(async () => {
    await redis?.kill();
  });

  it('starts a private server on a loopback port', async () => {
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(redis.pid).toBeGreaterThan(0);
    expect(redis.url).not.toBe(inject('redisUrl'));
    expect(await fastClient(redis.url).ping()).toBe('PONG');
  });

  it('flushTestDb without a prefix empties the private server', async () => {
    const c = client(redis.url);
    await c.set('x', '1');
    await c.set('y', '1');
    await flushTestDb(redis.url);
    expect(await c.dbsize()).toBe(0);
  });

  it('pause() stops answering and resume() answers again', async () => {
    const c = fastClient(redis.url);
    expect(await c.ping()).toBe('PONG');

    redis.pause();
    try {
      // The connected client gets no answer within 200 ms; its commandTimeout rejects the PING.
      const ping = c.ping();
      expect(await within200ms(ping)).not.toBe('answered');
      await expect(ping).rejects.toThrow(/timed out/i);
      // A fresh connection cannot get an answer either (the kernel accepts, nobody reads).
      expect(await within200ms(fastClient(redis.url).ping())).not.toBe('answered');
    } finally {
      redis.resume();
    }

    expect(await c.ping()).toBe('PONG');
  });

  it('kill() stops the server; restart() brings a new one up on the same port', async () => {
    const { port } = redis;
    const oldPid = redis.pid;
    await client(redis.url).set('before-restart', '1');

    await redis.kill();
    const dead = fastClient(redis.url);
    await expect(dead.ping()).rejects.toThrow();
    expect(() => process.kill(oldPid, 0)).toThrow(); // the process is gone

    await redis.restart();
    expect(redis.port).toBe(port);
    expect(redis.url).toBe(`redis://127.0.0.1:${port}`);
    expect(redis.pid).not.toBe(oldPid);
    const c = fastClient(redis.url);
    expect(await c.ping()).toBe('PONG');
    expect(await c.get('before-restart')).toBeNull(); // no persistence: a fresh, empty server
  });

  it('restart() of a paused server works too', async () => {
    const oldPid = redis.pid;
    redis.pause();
    await redis.restart();
    expect(redis.pid).not.toBe(oldPid);
    expect(await fastClient(redis.url).ping()).toBe('PONG');
  });
});
