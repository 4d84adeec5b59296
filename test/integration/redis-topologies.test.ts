import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { findOnPath, freePort, spawnRedis, type SpawnedRedis } from '../support/redis.js';
import { spawnSentinels, type Sentinels } from '../support/sentinel.js';
import { eventually } from '../support/time.js';

const run = promisify(execFile);

async function exercise(h: Harness): Promise<void> {
  const degraded = async () => (await h.sluice.metrics.degradedDecisions.get()).values.reduce((n, v) => n + v.value, 0);
  const user = `topo-${Date.now()}`;
  const { key, id } = await h.createKey(user);
  const free = () => request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
  const statuses: number[] = [];
  for (let i = 0; i < 22; i++) statuses.push((await free()).status);
  expect(statuses.filter((s) => s === 200)).toHaveLength(20);
  expect(statuses.slice(20)).toEqual([429, 429]);
  // An operator's reset (its counts deleted and every replica told, in one transaction on the
  // user's slot) works on this topology too: the next call is admitted at once.
  const reset = await fetch(`${h.adminUrl}/admin/users/${user}/limits`, { method: 'DELETE', headers: { authorization: 'Bearer test-admin-token-0123456789' } });
  expect(reset.status).toBe(200);
  expect((await free()).status).toBe(200);
  const ip: number[] = [];
  for (let i = 0; i < 21; i++) ip.push((await request(h.url, 'GET', '/api/log/token', { headers: { authorization: `Bearer ${key}` } })).status);
  expect(ip.slice(0, 20).every((s) => s === 200)).toBe(true);
  expect(ip[20]).toBe(429);
  const del = await fetch(`${h.adminUrl}/admin/keys/${id}`, { method: 'DELETE', headers: { authorization: 'Bearer test-admin-token-0123456789' } });
  expect(del.status).toBe(204);
  // Every decision above was Redis's own: none fell back to per-replica counting.
  expect(await degraded()).toBe(0);
  expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
}

describe('Redis Sentinel', () => {
  let master: SpawnedRedis;
  let sentinels: Sentinels;
  let h: Harness;

  beforeAll(async () => {
    master = await spawnRedis();
    sentinels = await spawnSentinels(master.port, { count: 1 });
    await eventually(async () => (await sentinels.masterPort()) === master.port, { timeoutMs: 10_000, intervalMs: 100, what: 'sentinel' });
    h = await startHarness({
      store: 'redis',
      storeFromConfig: true,
      env: {
        // The URL's host is not used with Sentinel: the master comes from the sentinels.
        SLUICE_REDIS_URL: 'redis://127.0.0.1:1/0',
        SLUICE_REDIS_SENTINELS: sentinels.addresses.join(','),
        SLUICE_REDIS_SENTINEL_NAME: sentinels.name,
      },
    });
  });
  afterAll(async () => {
    await h?.close();
    await sentinels?.kill();
    await master?.kill();
  });

  it('finds the master through the sentinels and enforces limits and keys there', async () => {
    await exercise(h);
    const direct = new Redis(master.url);
    try {
      expect((await direct.keys('sluice:*')).length).toBeGreaterThan(0);
    } finally {
      direct.disconnect();
    }
  });
});

describe('Redis Cluster', () => {
  const nodes: SpawnedRedis[] = [];
  let h: Harness;

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      nodes.push(await spawnRedis({ port, args: ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '2000'] }));
    }
    const cli = findOnPath('redis-cli');
    if (!cli) throw new Error('redis-cli is required for the Cluster test (Debian package redis-tools)');
    await run(cli, ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    // Every node must know the slot map, not just the one the cluster was created from.
    const stateOk = async (url: string): Promise<boolean> => {
      const c = new Redis(url, { maxRetriesPerRequest: 0 });
      c.on('error', () => {});
      try {
        return ((await c.cluster('INFO')) as string).includes('cluster_state:ok');
      } finally {
        c.disconnect();
      }
    };
    await eventually(async () => (await Promise.all(nodes.map((n) => stateOk(n.url)))).every(Boolean), {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: 'cluster_state:ok on every node',
    });
    h = await startHarness({
      store: 'redis',
      storeFromConfig: true,
      env: {
        SLUICE_REDIS_URL: 'redis://127.0.0.1:1',
        SLUICE_REDIS_CLUSTER_NODES: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
      },
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await Promise.all(nodes.map((n) => n.kill()));
  });

  it('runs every script on one slot per subject and enforces limits and keys', async () => {
    await exercise(h);
  });
});
