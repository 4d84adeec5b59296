import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis } from 'ioredis';
import { buildConfig } from '../../src/config/index.js';
import { RedisStore, redisStoreOptions } from '../../src/store/redis/index.js';
import { EVIDENCE_MARGIN_MS } from '../../src/store/redis/scripts.js';
import type { Decision, LimitCheck } from '../../src/store/types.js';
import { spawnRedis, uniquePrefix } from '../support/redis.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { eventually, nextTurn } from '../support/time.js';

/**
 * Counts the writes that reach the command socket (one per system call once corked writes are merged).
 * It wraps the socket ioredis keeps in `stream` (not a documented API): if an ioredis upgrade breaks
 * this, the batching in RedisStore (`consume`, `flush`) needs checking too.
 */
function countSocketWrites(store: RedisStore): { writes: number } {
  const s = (store.client as unknown as { stream: { _write: (...a: unknown[]) => void; _writev?: (...a: unknown[]) => void } }).stream;
  const counter = { writes: 0 };
  const write = s._write.bind(s);
  s._write = (...a: unknown[]) => {
    counter.writes++;
    write(...a);
  };
  if (s._writev) {
    const writev = s._writev.bind(s);
    s._writev = (...a: unknown[]) => {
      counter.writes++;
      writev(...a);
    };
  }
  return counter;
}

/** Counts the script runs that take decisions (each a batch of one or more). */
function countScriptRuns(store: RedisStore): { runs: number; decisions: number[] } {
  const client = store.client as unknown as { sluiceConsume: (numKeys: number, ...a: Array<string | number>) => Promise<unknown> };
  const counter = { runs: 0, decisions: [] as number[] };
  const run = client.sluiceConsume.bind(client);
  client.sluiceConsume = (numKeys, ...a) => {
    counter.runs++;
    counter.decisions.push(Number(a[numKeys])); // ARGV[1]: the number of decisions
    return run(numKeys, ...a);
  };
  return counter;
}

describe('Redis store decisions', () => {
  let store: RedisStore;
  const prefix = uniquePrefix('store');
  beforeAll(async () => {
    store = new RedisStore({ url: inject('redisUrl'), keyPrefix: prefix, commandTimeoutMs: 2000 });
    await store.waitReady();
  });
  afterAll(() => store.close());

  it('decisions issued together leave in one socket write and stay exact', async () => {
    const check: LimitCheck[] = [{ kind: 'window', key: 'burst', limit: 50, windowMs: 60_000 }];
    const counter = countSocketWrites(store);
    const now = Date.now();
    const decisions = await Promise.all(Array.from({ length: 120 }, (_, i) => store.consume(check, now, `m${i}`)));
    expect(decisions.filter((d) => d.admitted)).toHaveLength(50);
    expect(counter.writes).toBe(1);
  });

  it('decisions taken together get exactly the answers they would get one at a time', async () => {
    // Users with a day counter, a rolling window and both, several calls each, interleaved.
    const t0 = Date.UTC(2026, 5, 1, 12);
    // The two counters differ only in their limit, the two windows only in their length: a run
    // sends each set of checks (its shape) once, and each decision must be held to its own.
    const counter = (k: string, i: number): LimitCheck => ({ kind: 'counter', key: `${k}:c${i % 2}`, limit: 2 + (i % 2), resetAtMs: t0 + 3_600_000 });
    const window = (k: string, i: number): LimitCheck => ({ kind: 'window', key: `${k}:w${i % 2}`, limit: 3, windowMs: 60_000 - (i % 2) * 57_000 });
    const checksOf = (k: string, i: number): LimitCheck[] => {
      if (i % 3 === 0) return [counter(k, i)];
      if (i % 3 === 1) return [window(k, i)];
      return [counter(k, i), window(k, i)];
    };
    const calls = Array.from({ length: 40 }, (_, i) => ({ i, now: t0 + i * 250 }));
    const runs = countScriptRuns(store);
    const together = await Promise.all(calls.map(({ i, now }) => store.consume(checksOf('together', i), now, `m${i}`)));
    expect(runs.runs).toBe(1);
    const alone: Decision[] = [];
    for (const { i, now } of calls) alone.push(await store.consume(checksOf('alone', i), now, `m${i}`));
    expect(runs.runs).toBe(41);
    expect(together).toEqual(alone);
    expect(together.filter((d) => d.admitted).length).toBeGreaterThan(0);
    expect(together.filter((d) => !d.admitted).length).toBeGreaterThan(0);
  });

  it('a member that would break the run apart (white space) fails its own decision only; the others of its turn are decided', async () => {
    const check: LimitCheck[] = [{ kind: 'window', key: 'spaced', limit: 5, windowMs: 60_000 }];
    const now = Date.now();
    const [before, bad, tab, after] = await Promise.allSettled([
      store.consume(check, now, 'a'),
      store.consume(check, now, 'b 1 1'),
      store.consume(check, now, 'b\t1\t1'),
      store.consume(check, now, 'c'),
    ]);
    expect(bad.status).toBe('rejected');
    expect(tab.status).toBe('rejected');
    expect(before).toEqual({ status: 'fulfilled', value: { admitted: true, used: [1], resetMs: [60_000] } });
    expect(after).toEqual({ status: 'fulfilled', value: { admitted: true, used: [2], resetMs: [60_000] } });
  });

  it('a time with a fraction of a millisecond is read whole (decisions travel packed in one argument)', async () => {
    const t0 = Date.UTC(2026, 5, 1, 12);
    const window: LimitCheck[] = [{ kind: 'window', key: 'fraction-window', limit: 5, windowMs: 60_000 }];
    expect((await store.consume(window, t0 + 0.5, 'a')).used).toEqual([1]);
    // Half a window later the first call still counts: it was kept at its own time, not at a misread one.
    expect((await store.consume(window, t0 + 30_000, 'b')).used).toEqual([2]);
  });

  it('a burst goes as script runs of at most 64 decisions, all in one socket write', async () => {
    const check: LimitCheck[] = [{ kind: 'window', key: 'runs', limit: 1000, windowMs: 60_000 }];
    const runs = countScriptRuns(store);
    const writes = countSocketWrites(store);
    const now = Date.now();
    const decisions = await Promise.all(Array.from({ length: 150 }, (_, i) => store.consume(check, now, `m${i}`)));
    expect(decisions.every((d) => d.admitted)).toBe(true);
    expect(decisions.map((d) => d.used[0]).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    expect(runs.decisions).toEqual([64, 64, 22]);
    expect(writes.writes).toBe(1);
  });

  it('a key of the wrong type fails only the decision that uses it, not the rest of its batch', async () => {
    await store.client.set(`${prefix}planted`, 'not a sorted set');
    const now = Date.now();
    const window = (key: string): LimitCheck => ({ kind: 'window', key, limit: 5, windowMs: 60_000 });
    const day: LimitCheck = { kind: 'counter', key: 'planted-day', limit: 5, resetAtMs: now + 3_600_000 };
    const runs = countScriptRuns(store);
    const [before, bad, after] = await Promise.allSettled([
      store.consume([day, window('beside-planted')], now, 'a'),
      store.consume([day, window('planted')], now, 'b'),
      store.consume([day, window('beside-planted')], now, 'c'),
    ]);
    expect(runs.runs).toBe(1);
    expect(bad.status).toBe('rejected');
    expect(String((bad as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    // The calls around it were decided as if it had not been there: the failed one counted nowhere.
    expect(before).toEqual({ status: 'fulfilled', value: { admitted: true, used: [1, 1], resetMs: [3_600_000, 60_000] } });
    expect(after).toEqual({ status: 'fulfilled', value: { admitted: true, used: [2, 2], resetMs: [3_600_000, 60_000] } });
    expect(await store.client.get(`${prefix}planted-day`)).toBe('2');
  });

  it('with batchDecisions off, every decision is its own script run, and the runs of one turn still leave in one write', async () => {
    // As a deployment gets it: from the config file's redis section.
    const config = buildConfig({ redis: { keyPrefix: uniquePrefix('single'), batchDecisions: false } }, { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:1' });
    const single = new RedisStore(redisStoreOptions(config.redis, inject('redisUrl')));
    try {
      await single.waitReady();
      const runs = countScriptRuns(single);
      const writes = countSocketWrites(single);
      const check: LimitCheck[] = [{ kind: 'window', key: 'w', limit: 3, windowMs: 60_000 }];
      const now = Date.now();
      const decisions = await Promise.all(Array.from({ length: 5 }, (_, i) => single.consume(check, now, `m${i}`)));
      expect(runs.decisions).toEqual([1, 1, 1, 1, 1]);
      expect(writes.writes).toBe(1);
      expect(decisions.map((d) => d.admitted)).toEqual([true, true, true, false, false]);
    } finally {
      await single.close();
    }
  });

  it('keys expire: a window key a window (and the clocks margin) after its last call, a day key 27 hours after its day ends (any zone)', async () => {
    const now = Date.now();
    const checks: LimitCheck[] = [
      { kind: 'counter', key: 'ttl-day', limit: 10, resetAtMs: now + 600_000 },
      { kind: 'window', key: 'ttl-win', limit: 10, windowMs: 60_000 },
    ];
    await store.consume(checks, now, 'a');
    await store.consume(checks, now, 'b');
    const ttl = async (k: string) => store.client.pttl(`${prefix}${k}`);
    expect(await ttl('ttl-day')).toBeGreaterThan(600_000 + 27 * 3_600_000 - 5_000);
    expect(await ttl('ttl-day')).toBeLessThanOrEqual(600_000 + 27 * 3_600_000);
    expect(await ttl('ttl-win')).toBeGreaterThan(60_000 + EVIDENCE_MARGIN_MS - 5_000);
    expect(await ttl('ttl-win')).toBeLessThanOrEqual(60_000 + EVIDENCE_MARGIN_MS);
  });

  it('a held decision leaves at the end of the same loop turn, not after a timer', async () => {
    const check: LimitCheck[] = [{ kind: 'counter', key: 'turns', limit: 10, resetAtMs: Date.now() + 60_000 }];
    const counter = countSocketWrites(store);
    const first = store.consume(check, Date.now(), 'a');
    expect(counter.writes).toBe(0); // held while this turn's callbacks run
    await nextTurn();
    expect(counter.writes).toBe(1); // and written before the next turn's first callback
    expect((await first).admitted).toBe(true);
    const second = await store.consume(check, Date.now(), 'b');
    expect(second.used[0]).toBe(2);
    expect(counter.writes).toBe(2);
  });
});

describe('Redis store failures', () => {
  it('a decision asked of a closed store fails at once instead of waiting', async () => {
    const closed = new RedisStore({ url: inject('redisUrl'), keyPrefix: uniquePrefix('closed'), commandTimeoutMs: 2000 });
    await closed.waitReady();
    await closed.close();
    const t0 = Date.now();
    const settled = await Promise.allSettled([1, 2, 3].map((i) => closed.consume([{ kind: 'window', key: 'w', limit: 5, windowMs: 60_000 }], Date.now(), `m${i}`)));
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('a reply of the wrong shape fails the decisions it cannot answer instead of throwing', async () => {
    const s = new RedisStore({ url: inject('redisUrl'), keyPrefix: uniquePrefix('shape'), commandTimeoutMs: 2000 });
    try {
      await s.waitReady();
      const client = s.client as unknown as { sluiceConsume: (...a: unknown[]) => Promise<unknown> };
      const check: LimitCheck[] = [{ kind: 'window', key: 'w', limit: 5, windowMs: 60_000 }];
      // What a proxy in between or a future Redis might answer: a nil, then an array one decision short.
      for (const reply of [null, [0, 0, 1, 60_000]]) {
        client.sluiceConsume = () => Promise.resolve(reply);
        const settled = await Promise.allSettled([s.consume(check, Date.now(), 'a'), s.consume(check, Date.now(), 'b')]);
        if (reply === null) expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected']);
        else expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
      }
    } finally {
      await s.close();
    }
  });

  it('a fault of Redis itself (read-only after a failover) fails the whole run as a command error, and decisions work again after', async () => {
    const own = await spawnRedis();
    const admin = new Redis(own.url);
    const s = new RedisStore({ url: own.url, keyPrefix: 'ro:', commandTimeoutMs: 2000 });
    try {
      await s.waitReady();
      const check = (key: string): LimitCheck[] => [{ kind: 'window', key, limit: 5, windowMs: 60_000 }];
      expect((await s.consume(check('warm'), Date.now(), 'w')).admitted).toBe(true);
      // A demoted master: a replica of an address nobody listens on, so it stays read-only and empty-handed.
      await admin.replicaof('127.0.0.1', '1');
      const settled = await Promise.allSettled(['a', 'b'].map((k) => s.consume(check(k), Date.now(), k)));
      expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      for (const r of settled) {
        const err = (r as PromiseRejectedResult).reason as Error;
        // The command's own error, as ioredis reports a failed command (its reconnectOnError sees it).
        expect(err.name).toBe('ReplyError');
        expect(err.message).toMatch(/READONLY/);
      }
      await admin.replicaof('NO', 'ONE');
      expect((await s.consume(check('a'), Date.now(), 'a2')).used).toEqual([1]);
    } finally {
      admin.disconnect();
      await s.close();
      await own.kill();
    }
  });
});

describe('Redis store: a limit reset', () => {
  it('keeps its time apart from every count: a per-IP rule named `reset` still counts after a reset of its address', async () => {
    const store = new RedisStore({ url: inject('redisUrl'), keyPrefix: uniquePrefix('rm'), commandTimeoutMs: 2000 });
    try {
      await store.waitReady();
      const checks: LimitCheck[] = [{ kind: 'window', subject: 'ip:192.0.2.7', key: 'reset', limit: 2, windowMs: 60_000 }];
      const now = Date.now();
      expect((await store.consume(checks, now, 'm1')).admitted).toBe(true);
      await store.resetLimits('ip:192.0.2.7', checks, now + 1);
      expect((await store.consume(checks, now + 2, 'm2')).admitted).toBe(true);
      expect((await store.inspect(checks, now + 3)).map((s) => s.used)).toEqual([1]);
    } finally {
      await store.close();
    }
  });
});

describe('Redis store reconnects', () => {
  it('says so when the decision connection comes back after a break, and not for the key-change feed', async () => {
    const url = inject('redisUrl');
    const store = new RedisStore({ url, keyPrefix: uniquePrefix('rc'), commandTimeoutMs: 2000 });
    const admin = new Redis(url);
    try {
      await store.waitReady();
      let reconnects = 0;
      const flushes: string[] = [];
      store.onReconnect(() => reconnects++);
      store.onKeyChange((c) => flushes.push(c.type));
      // The subscriber alone: its messages may be lost, so key caches flush; decisions are unaffected.
      // Not a documented field: the store's subscriber connection, found by its local port.
      const sub = (store as unknown as { sub: Redis & { stream: { localPort: number } } }).sub;
      await eventually(() => sub.status === 'ready', { intervalMs: 20 });
      await admin.client('KILL', 'ADDR', `127.0.0.1:${sub.stream.localPort}`);
      await eventually(() => flushes.includes('flush'), { intervalMs: 20 });
      expect(reconnects).toBe(0);
      // The decision connection.
      const id = String(await store.client.client('ID'));
      await admin.client('KILL', 'ID', id);
      await eventually(() => reconnects === 1, { intervalMs: 20 });
      await expect(store.ping()).resolves.toBeUndefined();
    } finally {
      admin.disconnect();
      await store.close();
    }
  });
  it('says so when the decision connection first comes up after failing to at start-up, and not when it came up at once', async () => {
    const redis = new URL(inject('redisUrl'));
    const proxy = await startTcpProxy(redis.hostname, Number(redis.port));
    const through = new URL(redis.href);
    through.port = String(proxy.port);
    proxy.cut();
    const late = new RedisStore({ url: through.href, keyPrefix: uniquePrefix('rc'), commandTimeoutMs: 100 });
    const atOnce = new RedisStore({ url: redis.href, keyPrefix: uniquePrefix('rc'), commandTimeoutMs: 2000 });
    try {
      let lateReconnects = 0;
      let atOnceReconnects = 0;
      late.onReconnect(() => lateReconnects++);
      atOnce.onReconnect(() => atOnceReconnects++);
      await atOnce.waitReady();
      await expect(late.ping()).rejects.toThrow();
      proxy.restore();
      await late.waitReady(5_000);
      await eventually(() => lateReconnects === 1, { intervalMs: 20 });
      expect(atOnceReconnects).toBe(0);
    } finally {
      await late.close();
      await atOnce.close();
      await proxy.close();
    }
  });
});
