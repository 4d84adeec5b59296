/**
 * Redis frozen (SIGSTOP) for 30 s under traffic, in front of two sluice processes that share it,
 * as two Pods of one Deployment do. Its own file: 30 s of fault runs beside the other files.
 *
 * Readiness says whether a replica can serve, not whether the shared Redis is up: both stay
 * ready at every sample (a readiness probe of 5 s x 2 would otherwise empty the Service about
 * 10 s in), paid calls of known keys go on, free calls follow onStoreError (open: admitted and
 * counted in memory), sluice_store_up says 0 and then 1 again, and afterwards every user's counts
 * in Redis are exactly the calls admitted, none lost and none counted twice (the decisions sent
 * during the freeze ran when Redis woke: the replay recognises them), so the limit binds exactly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { CHILD_ADMIN_TOKEN, metric, startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { request } from '../support/http.js';
import { spawnRedis, type SpawnedRedis } from '../support/redis.js';
import { eventually, sleep } from '../support/time.js';

const PAUSE_MS = 30_000;

describe('Redis frozen for 30 s under traffic, two replicas', () => {
  let redis: SpawnedRedis;
  let relay: RelayStandin;
  let replicas: ChildSluice[] = [];

  beforeAll(async () => {
    redis = await spawnRedis();
    relay = await startRelayStandin({ quiet: true });
    replicas = await Promise.all([0, 1].map(() => startChildSluice({ relayUrl: relay.url, env: { SLUICE_REDIS_URL: redis.url } })));
  }, 30_000);
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await relay?.close();
    await redis?.kill();
  });

  const totalOf = async (name: string, result: string): Promise<number> => {
    let n = 0;
    for (const r of replicas) {
      const text = await (await fetch(`${r.adminUrl}/metrics`)).text();
      n += Number(new RegExp(`^${name}\\{result="${result}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    }
    return n;
  };

  it('keeps both replicas ready and serving, says the store is down, and loses or doubles no count', async () => {
    const users = ['pause-a', 'pause-b', 'pause-c'];
    const keys = await Promise.all(users.map((u) => replicas[0]!.createKey(u)));
    const call = (replica: number, user: number, model: string) =>
      request(replicas[replica]!.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${keys[user]}` }, body: JSON.stringify({ model }) });
    const admitted = users.map(() => 0);
    const readyz: number[] = [];
    const storeUp: Array<number | undefined> = [];
    const sample = async (): Promise<void> => {
      for (const r of replicas) {
        readyz.push((await fetch(`${r.adminUrl}/readyz`)).status);
        storeUp.push(await metric(r.adminUrl, 'sluice_store_up'));
      }
    };

    // Before: every key known to both replicas (a paid call each), two free calls per user.
    for (let u = 0; u < users.length; u++) {
      for (const r of [0, 1]) {
        expect((await call(r, u, 'vend-flash')).status).toBe(200);
        expect((await call(r, u, 'vend-flash-free')).status).toBe(200);
        admitted[u]!++;
      }
    }
    await sample();

    redis.pause();
    const t0 = Date.now();
    const paid: number[] = [];
    const free: number[] = [];
    const until = (ms: number) => sleep(Math.max(0, t0 + ms - Date.now()));
    try {
      await Promise.all([
        // Readiness and sluice_store_up of both replicas, twice a second.
        (async () => {
          while (Date.now() - t0 < PAUSE_MS) await Promise.all([sample(), sleep(500)]);
        })(),
        // Paid calls of every user, on either replica.
        (async () => {
          for (let i = 0; Date.now() - t0 < PAUSE_MS; i++) await Promise.all([call(i % 2, i % users.length, 'vend-flash').then((r) => paid.push(r.status)), sleep(400)]);
        })(),
        // Six free calls per user, three on each replica, spread over the freeze from 2 s in.
        (async () => {
          for (let k = 0; k < 18; k++) {
            await until(2000 + k * 1400);
            const u = k % users.length;
            const s = (await call(Math.floor(k / users.length) % 2, u, 'vend-flash-free')).status;
            free.push(s);
            if (s === 200) admitted[u]!++;
          }
        })(),
      ]);
      await until(PAUSE_MS);
    } finally {
      redis.resume();
    }
    expect(
      readyz.every((s) => s === 200),
      `readyz samples: ${readyz.join(',')}`,
    ).toBe(true);
    expect(paid.every((s) => s === 200)).toBe(true);
    expect(free).toEqual(Array(18).fill(200)); // onStoreError: open admits, counted in each replica's memory
    expect(storeUp.slice(0, 2)).toEqual([1, 1]);
    expect(storeUp).toContain(0);

    // Redis answers again: sluice_store_up back to 1 on both, and each user's counts are exact.
    const limits = async (user: string) =>
      (
        (await (await fetch(`${replicas[1]!.adminUrl}/admin/users/${user}/limits`, { headers: { authorization: `Bearer ${CHILD_ADMIN_TOKEN}` } })).json()) as {
          freeTier: { day: { used: number }; window: { used: number } };
        }
      ).freeTier;
    const settled = async (): Promise<boolean> => {
      for (const r of replicas) if ((await metric(r.adminUrl, 'sluice_store_up')) !== 1) return false;
      return (await totalOf('sluice_outage_replays_total', 'already_counted')) + (await totalOf('sluice_outage_replays_total', 'replayed')) === 18;
    };
    // Settled or not, the checks below say what is missing.
    await eventually(settled, { timeoutMs: 5000, intervalMs: 200 }).catch(() => {});
    await sample();
    expect(
      readyz.every((s) => s === 200),
      `readyz samples: ${readyz.join(',')}`,
    ).toBe(true);
    expect(storeUp.slice(-2)).toEqual([1, 1]);
    // Every call decided during the freeze was sent, and ran once Redis woke: the replay finds each one counted already.
    expect(await totalOf('sluice_outage_replays_total', 'already_counted')).toBe(18);
    expect(await totalOf('sluice_outage_replays_total', 'replayed')).toBe(0);
    for (let u = 0; u < users.length; u++) {
      const s = await limits(users[u]!);
      expect([s.day.used, s.window.used]).toEqual([admitted[u], admitted[u]]);
    }
    // Exact counting resumes: across both replicas, each user gets exactly what is left of 20 a minute.
    for (let u = 0; u < users.length; u++) {
      const statuses: number[] = [];
      for (let i = 0; i < 20 - admitted[u]! + 1; i++) statuses.push((await call(i % 2, u, 'vend-flash-free')).status);
      expect(statuses).toEqual([...Array(20 - admitted[u]!).fill(200), 429]);
    }
  }, 55_000);
});
