/**
 * A real Sentinel failover under traffic: a master, a replica and three sentinels, and
 * `SENTINEL FAILOVER` while three users call free models. No client sees an error, and afterwards
 * each user's counts in Redis equal the free calls admitted: the decisions taken in memory
 * while the connection moved (limits.onStoreError: open) were added to the new master's counts.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { spawnRedis, type SpawnedRedis } from '../support/redis.js';
import { spawnSentinels, type Sentinels } from '../support/sentinel.js';
import { eventually, sleep } from '../support/time.js';

async function info(port: number, section: string): Promise<string> {
  const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return await c.info(section);
  } finally {
    c.disconnect();
  }
}

describe('a Sentinel failover under traffic', () => {
  let master: SpawnedRedis;
  let replica: SpawnedRedis;
  let sentinels: Sentinels;
  let h: Harness;

  beforeAll(async () => {
    // A deposed master refuses writes as soon as its replica leaves it, instead of taking writes the
    // failover then discards (docs/operations.md, Redis outage): sluice counts those calls in memory.
    master = await spawnRedis({ args: ['--min-replicas-to-write', '1', '--min-replicas-max-lag', '10'] });
    replica = await spawnRedis({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    await eventually(async () => (await info(replica.port, 'replication')).includes('master_link_status:up'), { timeoutMs: 10_000, intervalMs: 100, what: 'the replica to sync' });
    sentinels = await spawnSentinels(master.port, { count: 3 });
    // Every sentinel must know the replica before it can promote it.
    await eventually(
      async () => {
        for (let i = 0; i < 3; i++) {
          const rs = (await sentinels.ask(['replicas', sentinels.name], i)) as string[][];
          if (!rs.some((r) => r.includes(String(replica.port)) && !r.join(' ').includes('disconnected'))) return false;
        }
        return true;
      },
      { timeoutMs: 15_000, intervalMs: 100, what: 'the sentinels to find the replica' },
    );
    h = await startHarness({
      store: 'redis',
      storeFromConfig: true,
      // Limits far above what the test sends: every free call is admitted, so the counts must equal the 200s.
      file: { freeTier: { perMinute: 1000, perDay: 10_000 } },
      env: {
        SLUICE_REDIS_URL: 'redis://127.0.0.1:1/0',
        SLUICE_REDIS_SENTINELS: sentinels.addresses.join(','),
        SLUICE_REDIS_SENTINEL_NAME: sentinels.name,
      },
    });
  }, 45_000);
  afterAll(async () => {
    await h?.close();
    await sentinels?.kill();
    await Promise.all([master?.kill(), replica?.kill()]);
  });

  it('answers every call, and leaves each user counted in Redis exactly as often as admitted', async () => {
    const users = ['fo-a', 'fo-b', 'fo-c'];
    const keys = await Promise.all(users.map(async (u) => (await h.createKey(u)).key));
    const admitted = users.map(() => 0);
    const failures: string[] = [];
    let running = true;
    const traffic = users.map(async (_, i) => {
      while (running) {
        const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${keys[i]}` }, body: '{"model":"vend-flash-free"}' });
        if (r.status === 200) admitted[i]!++;
        else failures.push(`${r.status} ${r.text.slice(0, 120)}`);
        await sleep(10);
      }
    });
    try {
      await sleep(1000);
      // A planned failover: writes on the master pause first, so that the replica has every write
      // the master acknowledged when it is promoted (replication is asynchronous: without it, a
      // write the master took in its last moment, before it saw its replica go, is lost with it,
      // whatever the client does). sluice's decisions meanwhile wait, time out and are taken in memory.
      const m = new Redis({ port: master.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
      try {
        await m.client('PAUSE', 5000, 'WRITE');
      } finally {
        m.disconnect();
      }
      await sentinels.ask(['failover', sentinels.name]);
      await eventually(async () => (await sentinels.masterPort()) === replica.port, { timeoutMs: 15_000, intervalMs: 100, what: 'the sentinels to promote the replica' });
      // Traffic goes on until sluice takes decisions on the new master, and a while after.
      await eventually(async () => /cmdstat_evalsha:calls=\d+/.test(await info(replica.port, 'commandstats')), {
        timeoutMs: 15_000,
        intervalMs: 100,
        what: 'sluice to decide on the new master',
      });
      await sleep(1500);
    } finally {
      running = false;
      await Promise.all(traffic);
    }
    expect(failures).toEqual([]);
    const text = await metricsText(h);
    // The failover did take decisions away from Redis: this test saw what it is about.
    expect(metricValue(text, 'sluice_degraded_decisions_total', { limit: 'free_tier' }) ?? 0).toBeGreaterThan(0);
    const counted = async (): Promise<number[][]> =>
      Promise.all(
        users.map(async (u) => {
          const s = (await (await fetch(`${h.adminUrl}/admin/users/${u}/limits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as {
            freeTier: { day: { used: number }; window: { used: number } };
          };
          return [s.freeTier.day.used, s.freeTier.window.used];
        }),
      );
    const expected = admitted.map((n) => [n, n]);
    // The replay runs within a second of the store answering again.
    await eventually(
      async () => {
        const seen = await counted();
        if (JSON.stringify(seen) === JSON.stringify(expected)) return;
        // On failure, what became of the calls decided in memory.
        const replays = (await metricsText(h)).split('\n').filter((l) => /^sluice_(outage_replays|degraded_decisions)/.test(l));
        expect(seen, replays.join('; ')).toEqual(expected);
      },
      { timeoutMs: 5000, intervalMs: 200 },
    );
  }, 60_000);
});
