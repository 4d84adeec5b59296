/**
 * The first decisions after Redis comes back (a helper's probe, issue 28): two replicas admit a
 * user's free calls in memory while Redis cannot be reached, then Redis answers again. Those calls
 * must be counted before any new call is decided: the first decisions after the reconnect were
 * taken against a window without them, and admitted 6 to 12 calls over the limit in 5 of 5 runs.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue, usedToday } from '../support/helpers.js';
import { request } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { eventually, sleep } from '../support/time.js';

/** Two replicas on one Redis and one relay, B (and A, with `bothCut`) through a TCP proxy a test can cut. */
interface Replicas {
  proxy: TcpProxy;
  a: Harness;
  b: Harness;
}

function useTwoReplicas(tag: string, { bothCut }: { bothCut: boolean }): Replicas {
  const r = {} as Replicas;
  let relay: RelayStandin | undefined;
  beforeAll(async () => {
    const redis = new URL(inject('redisUrl'));
    r.proxy = await startTcpProxy(redis.hostname, Number(redis.port));
    const through = new URL(redis.href);
    through.port = String(r.proxy.port);
    relay = await startRelayStandin({ quiet: true });
    const common = { store: 'redis' as const, relay, prefix: uniquePrefix(tag), redisCommandTimeoutMs: 100, file: { limits: { rememberRefusalsSeconds: 0 } } };
    [r.a, r.b] = await Promise.all([startHarness({ ...common, redisUrl: bothCut ? through.href : redis.href }), startHarness({ ...common, redisUrl: through.href })]);
  });
  afterAll(async () => {
    await Promise.all([r.a?.close(), r.b?.close()]);
    await relay?.close();
    await r.proxy?.close();
  });
  return r;
}

/** A free call of `key` on `h`. */
const freeCall = (h: Harness, key: string) =>
  request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash-free' }) });

describe('Redis reachable again after replicas admitted calls in memory', () => {
  const replicas = useTwoReplicas('outage-recovery', { bothCut: true });

  it('counts them before deciding anything new: no call past the limit is admitted after the reconnect', async () => {
    const { a, b, proxy } = replicas;
    const { key } = await a.createKey('recovering');
    const free = (h: Harness) => freeCall(h, key);
    // Both replicas know the key before the outage.
    for (const h of [a, b]) expect((await free(h)).status).toBe(200);
    let admitted = 2;

    proxy.cut();
    // Each replica admits up to the limit on its own, in memory.
    for (let i = 0; i < 20; i++) {
      const answers = await Promise.all([free(a), free(b)]);
      admitted += answers.filter((r) => r.status === 200).length;
    }
    expect(admitted).toBeGreaterThan(20);
    proxy.restore();

    // Bursts on both replicas while they reconnect and afterwards: none is admitted.
    const after: number[] = [];
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      const answers = await Promise.all([free(a), free(a), free(a), free(b), free(b), free(b)]);
      after.push(...answers.map((r) => r.status));
      await sleep(25);
    }
    expect(after.filter((s) => s === 200)).toEqual([]);
    expect(after.filter((s) => s === 429).length).toBeGreaterThan(0);
    // And Redis holds exactly the calls admitted.
    await eventually(async () => expect(await usedToday(a, 'recovering')).toBe(admitted), { timeoutMs: 3000, what: 'the outage calls counted in Redis' });
  });
});

describe("an operator reset while a replica is cut off from Redis (a helper's probe, issue 28)", () => {
  const replicas = useTwoReplicas('reset-partition', { bothCut: false });

  it('is not undone when that replica comes back: the calls it admitted in memory before the reset are not added', async () => {
    const { a, b, proxy } = replicas;
    const { key } = await a.createKey('reset-while-cut');
    const free = (h: Harness) => freeCall(h, key);
    expect((await free(b)).status).toBe(200);
    proxy.cut();
    // B, cut off (its subscription too: it never hears of the reset), admits the user's calls in memory.
    let inMemory = 0;
    for (let i = 0; i < 20; i++) if ((await free(b)).status === 200) inMemory++;
    expect(inMemory).toBeGreaterThan(0);
    const reset = await fetch(`${a.adminUrl}/admin/users/reset-while-cut/limits`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(reset.status).toBe(200);
    expect((await free(a)).status).toBe(200);
    proxy.restore();
    await eventually(async () => expect(metricValue(await metricsText(b), 'sluice_outage_replays_total', { result: 'reset' })).toBe(inMemory), {
      timeoutMs: 5000,
      what: 'the outage calls replayed as reset',
    });
    // Only the call after the reset counts, and the user is served on both replicas.
    expect(await usedToday(a, 'reset-while-cut')).toBe(1);
    expect((await free(a)).status).toBe(200);
    expect((await free(b)).status).toBe(200);
    expect(await usedToday(a, 'reset-while-cut')).toBe(3);
  });
});
