import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';
import { eventually, sleep } from '../support/time.js';

describe('several replicas on one Redis', () => {
  let relay: RelayStandin;
  let replicas: Harness[];

  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    const prefix = uniquePrefix('replicas');
    replicas = await Promise.all([0, 1, 2].map(() => startHarness({ store: 'redis', relay, prefix })));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await relay.close();
  });

  it('admit exactly 20 of 60 concurrent free-tier calls of one user', async () => {
    const { key } = await replicas[0]!.createKey('racer');
    relay.behave(() => true, { delayMs: 20 });
    const calls = Array.from({ length: 60 }, (_, i) =>
      request(replicas[i % 3]!.url, 'POST', '/v1/chat/completions', {
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: ['vend-flash-free', 'vend-v4-flash-free', 'vendd-5.3-flash-free'][i % 3], messages: [] }),
      }),
    );
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 429)).toHaveLength(40);
    relay.reset();
  });

  it('share per-IP budgets', async () => {
    const calls = Array.from({ length: 30 }, (_, i) => request(replicas[i % 3]!.url, 'GET', '/api/log/token'));
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    expect(statuses.filter((s) => s !== 429)).toHaveLength(20);
  });

  it('see a key deleted on one replica within 1 s on the others', async () => {
    const { key, id } = await replicas[0]!.createKey('leaver');
    const call = (i: number) => request(replicas[i]!.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } });
    // Warm every replica's cache.
    for (const i of [0, 1, 2]) expect((await call(i)).status).toBe(200);
    const del = await fetch(`${replicas[0]!.adminUrl}/admin/keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(del.status).toBe(204);
    expect((await call(0)).status).toBe(401);
    const deadline = Date.now() + 1000;
    for (const i of [1, 2]) await eventually(async () => expect((await call(i)).status).toBe(401), { timeoutMs: Math.max(0, deadline - Date.now()), intervalMs: 20 });
  });

  it('see a key created on one replica on the others within 200 ms, even one that had just cached it as unknown', async () => {
    const imported = 'sk-imported0123456789abcdefghij';
    const call = (i: number) => request(replicas[i]!.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${imported}` } });
    expect((await call(1)).status).toBe(401); // now remembered as unknown
    await replicas[0]!.createKey('importer', { key: imported });
    await sleep(200);
    expect((await call(1)).status).toBe(200);
    expect((await call(2)).status).toBe(200);
  });
});
