import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigMapDir } from '../support/configmap.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { spawnRedis, type SpawnedRedis } from '../support/redis.js';
import { capturedLog } from '../support/log.js';
import { eventually, sleep } from '../support/time.js';

const adminAuth = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('config hot reload through a ConfigMap symlink swap', () => {
  let h: Harness;
  let cm: ConfigMapDir;
  beforeAll(async () => {
    cm = new ConfigMapDir('freeTier:\n  perMinute: 20\n');
    const env = { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:1' };
    h = await startHarness({ store: 'redis', file: { freeTier: { perMinute: 20 } }, configFile: { path: cm.path, env: { ...env, SLUICE_CONFIG: cm.path } } });
  });
  afterAll(() => h.close());

  const effective = async () =>
    (await (await fetch(`${h.adminUrl}/admin/config`, { headers: adminAuth })).json()) as { freeTier: { perMinute: number }; upstream: { url: string } };

  it('applies a valid new file within 2 s, and keeps the old one when the new file is invalid', async () => {
    expect((await effective()).freeTier.perMinute).toBe(20);
    const before = h.sluice.config().upstream.url.href;
    cm.write('freeTier:\n  perMinute: 2\nupstream:\n  url: http://127.0.0.1:9/\n');
    await eventually(async () => (await effective()).freeTier.perMinute === 2, { timeoutMs: 2000, intervalMs: 50, what: 'the reload to apply' });
    // The upstream URL only changes on restart.
    expect(h.sluice.config().upstream.url.href).toBe(before);
    const { key } = await h.createKey('reload');
    const call = () => request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429);

    cm.write('freeTier:\n  perMinute: many\n');
    // The failure series appears with the first failed reload.
    await eventually(async () => (metricValue(await metricsText(h), 'sluice_config_reloads_total', { result: 'failure' }) ?? 0) >= 1, {
      timeoutMs: 2500,
      intervalMs: 50,
      what: 'the invalid reload to be reported',
    });
    expect((await effective()).freeTier.perMinute).toBe(2);
    expect(metricValue(await metricsText(h), 'sluice_config_reloads_total', { result: 'success' })).toBe(1);
  });
});

describe('metrics, logs and rate-limit fields', () => {
  let h: Harness;
  const logs = capturedLog();
  beforeAll(async () => {
    h = await startHarness({ store: 'redis', log: logs.log });
  });
  afterAll(() => h.close());

  it('counts requests by route family and outcome, and reports open streams', async () => {
    const { key } = await h.createKey('metrics');
    await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
    await request(h.url, 'GET', '/v1/models', { headers: { authorization: 'Bearer sk-bad' } });
    h.relay.behave(() => true, { sseIntervalMs: 200, sseEvents: 5 });
    const streamDone = new Promise<void>((resolve) => {
      const req = http.request(`${h.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.end('{"model":"claude-haiku-4-5","stream":true}');
    });
    await sleep(300);
    let text = await metricsText(h);
    expect(metricValue(text, 'sluice_open_streams')).toBe(1);
    await streamDone;
    h.relay.reset();
    text = await metricsText(h);
    expect(metricValue(text, 'sluice_open_streams')).toBe(0);
    expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'admitted' })).toBe(1);
    expect(metricValue(text, 'sluice_requests_total', { family: 'models', outcome: 'unauthorized' })).toBe(1);
    expect(metricValue(text, 'sluice_requests_total', { family: 'messages', outcome: 'admitted' })).toBe(1);
    expect(metricValue(text, 'sluice_decision_seconds_count', { family: 'chat' })).toBe(1);
    expect(metricValue(text, 'sluice_relay_seconds_count', { family: 'chat' })).toBe(1);
    expect(metricValue(text, 'sluice_store_seconds_count', { op: 'consume' })).toBeGreaterThanOrEqual(1);
    // A healthy Redis: every decision was taken by the store, none degraded. Both counters are
    // exported at 0 from start (the outage tests below see them > 0).
    expect(metricValue(text, 'sluice_store_errors_total', { op: 'consume' })).toBe(0);
    expect(metricValue(text, 'sluice_store_errors_total', { op: 'find_key' })).toBe(0);
    expect(metricValue(text, 'sluice_degraded_decisions_total', { limit: 'free_tier' })).toBe(0);
  });

  it('logs one JSON line per request with the decision, and never the key', async () => {
    logs.clear();
    const { key } = await h.createKey('logger');
    await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
    await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}x` }, body: '{}' });
    await sleep(50);
    const reqLines = logs.requests();
    expect(reqLines).toHaveLength(2);
    expect(reqLines[0]).toMatchObject({ family: 'chat', user: 'logger', model: 'vend-flash-free', decision: 'admitted', status: 200, freeTier: true });
    expect(reqLines[0]).toHaveProperty('reqId');
    expect(reqLines[0]).toHaveProperty('relayMs');
    expect(reqLines[0]).toHaveProperty('totalMs');
    expect(reqLines[1]).toMatchObject({ decision: 'unauthorized', status: 401 });
    const all = logs.text();
    expect(all).not.toContain(key.slice(3));
  });

  it('tells free-tier clients their state in RateLimit-Policy / RateLimit, and never overrides the relay own fields', async () => {
    const { key } = await h.createKey('rl');
    const call = () => request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
    const a = await call();
    expect(a.headers['ratelimit-policy']).toMatch(/^"free-window";q=20;w=60, "free-day";q=100;w=86400$/);
    expect(a.headers['ratelimit']).toMatch(/^"free-window";r=19;t=60, "free-day";r=99;t=\d+$/);
    const b = await call();
    expect(b.headers['ratelimit']).toMatch(/"free-window";r=18;/);
    h.relay.behave(() => true, { headers: { ratelimit: '"relay";r=0;t=5', 'x-ratelimit-remaining-requests': '0' } });
    const c = await call();
    expect(c.headers['ratelimit']).toBe('"relay";r=0;t=5');
    expect(c.headers['x-ratelimit-remaining-requests']).toBe('0');
    h.relay.reset();
    // Paid calls carry no free-tier fields.
    const p = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
    expect(p.headers['ratelimit']).toBeUndefined();
  });
});

describe('accessLog: errors', () => {
  let h: Harness;
  const logs = capturedLog();
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', file: { accessLog: 'errors' }, log: logs.log });
  });
  afterAll(() => h.close());

  it('logs refusals and relay failures, not the calls answered 2xx', async () => {
    const { key } = await h.createKey('quiet');
    const ok = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
    const refused = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: 'Bearer sk-unknown-key-0000' }, body: '{}' });
    h.relay.behave(() => true, { status: 503 });
    const failed = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
    // A stream the relay cuts after its 200 went out.
    h.relay.behave(() => true, { dieAfterEvents: 1 });
    await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash","stream":true}' }).catch(() => null);
    h.relay.reset();
    expect([ok.status, refused.status, failed.status]).toEqual([200, 401, 503]);
    await sleep(50);
    const logged = logs.requests();
    expect(logged.map((l) => [l.decision, l.status])).toEqual([
      ['unauthorized', 401],
      ['admitted', 503],
      ['upstream_aborted', 200],
    ]);
    // The counters still see every call.
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'admitted' })).toBe(2);
    expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'upstream_aborted' })).toBe(1);
  });
});

describe('the idle collection', () => {
  let h: Harness;
  let collections = 0;
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', idleGc: { collect: () => collections++, minRequests: 3, idleMs: 300, minHeapBytes: 0, checkEveryMs: 50 } });
  });
  afterAll(() => h.close());

  it('collects once the process has served enough requests and gone quiet, never before its traffic, and not again until traffic returns', async () => {
    const { key } = await h.createKey('idle');
    const call = () => request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
    await sleep(500);
    expect(collections).toBe(0); // idle since start, nothing served
    await call();
    await call();
    await sleep(500);
    expect(collections).toBe(0); // quiet, but fewer requests than the minimum
    await call();
    await sleep(1000);
    expect(collections).toBe(1);
    await sleep(400);
    expect(collections).toBe(1); // still quiet: nothing new to give back
    await call();
    await sleep(1000);
    expect(collections).toBe(2);
  });
});

describe('shadow mode', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      store: 'memory',
      file: { freeTier: { perMinute: 2, shadow: true }, ipLimits: [{ name: 'usage', paths: ['/api/*'], limit: 1, windowSeconds: 60, shadow: true }] },
    });
  });
  afterAll(() => h.close());

  it('counts and reports would-be rejections but admits', async () => {
    const { key } = await h.createKey('shadow');
    for (let i = 0; i < 4; i++) {
      expect((await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"x-free"}' })).status).toBe(200);
      expect((await request(h.url, 'GET', '/api/status', { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    }
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_shadow_rejections_total', { limit: 'free_tier', reason: 'window' })).toBe(2);
    expect(metricValue(text, 'sluice_shadow_rejections_total', { limit: 'ip:usage' })).toBe(3);
  });

  it('on the embedded store, key lookups and decisions record no store latency (there is no round trip), and the store is always up', async () => {
    const { key } = await h.createKey('embedded-metrics');
    expect((await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"x-free"}' })).status).toBe(200);
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'admitted' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'sluice_store_seconds_count')).toBeUndefined();
    // It lives in the process: always up. No relay database configured: no such gauge.
    expect(metricValue(text, 'sluice_store_up')).toBe(1);
    expect(metricValue(text, 'sluice_relay_db_up')).toBeUndefined();
  });
});

describe('draining', () => {
  it('turns readiness off at once, refuses new connections, lets streams finish, then stops', async () => {
    const h = await startHarness({ store: 'memory', file: { drainSeconds: 10 } });
    try {
      const { key } = await h.createKey('drain');
      h.relay.behave(() => true, { sseIntervalMs: 150, sseEvents: 6 });
      let events = 0;
      const stream = new Promise<string>((resolve) => {
        const req = http.request(
          `${h.url}/v1/chat/completions`,
          { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, agent: false },
          (res) => {
            res.on('data', (c: Buffer) => (events += (c.toString().match(/^data:/gm) ?? []).length));
            res.on('end', () => resolve(res.complete ? 'complete' : 'cut'));
            res.on('error', () => resolve('cut'));
          },
        );
        req.end('{"model":"gpt-4o","stream":true}');
      });
      await sleep(200);
      const drained = h.sluice.drain();
      expect((await fetch(`${h.adminUrl}/readyz`)).status).toBe(503);
      await expect(request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } })).rejects.toThrow(/ECONNREFUSED/);
      expect(await stream).toBe('complete');
      expect(events).toBeGreaterThanOrEqual(7);
      expect(await drained).toEqual({ forced: 0 });
    } finally {
      await h.close();
    }
  });

  it('cuts what is still open at the drain deadline, counted as drain_deadline (sluice cut it), not as the client leaving', async () => {
    const h = await startHarness({ store: 'memory', file: { drainSeconds: 1 } });
    try {
      const { key } = await h.createKey('drain2');
      h.relay.behave(() => true, { sseIntervalMs: 500, sseEvents: 100 });
      const stream = new Promise<string>((resolve) => {
        const req = http.request(
          `${h.url}/v1/chat/completions`,
          { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, agent: false },
          (res) => {
            res.resume();
            res.on('end', () => resolve('end'));
            res.on('error', () => resolve('cut'));
            res.on('close', () => resolve(res.complete ? 'end' : 'cut'));
          },
        );
        req.on('error', () => resolve('cut'));
        req.end('{"model":"gpt-4o","stream":true}');
      });
      await sleep(200);
      const t0 = Date.now();
      const r = await h.sluice.drain();
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(r.forced).toBe(1);
      expect(await stream).toBe('cut');
      const text = await metricsText(h);
      expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'drain_deadline' })).toBe(1);
      expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'client_aborted' })).toBe(0);
      // A later ask (SIGTERM after the Pod's shutdown hook drained) has nothing left to wait for.
      const again = Date.now();
      expect(await h.sluice.drain()).toEqual({ forced: 1 });
      expect(Date.now() - again).toBeLessThan(100);
    } finally {
      await h.close();
    }
  });
});

describe('Redis outage', () => {
  let redis: SpawnedRedis;
  let h: Harness;
  let known: string;
  const BOUND_MS = 600; // command timeout 100 ms, plus generous scheduling slack on a 2-core CI box

  beforeAll(async () => {
    redis = await spawnRedis();
    // Refusals remembered for an hour: only the reconnect can make this replica forget them.
    h = await startHarness({ store: 'redis', redisUrl: redis.url, redisCommandTimeoutMs: 100, file: { limits: { rememberRefusalsSeconds: 3600 } } });
    known = (await h.createKey('outage')).key;
    const warm = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${known}` } });
    expect(warm.status).toBe(200);
  });
  afterAll(async () => {
    await h.close();
    await redis.kill();
  });

  async function timed(key: string, model: string): Promise<{ status: number; ms: number; code?: string }> {
    const t0 = performance.now();
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model }) });
    const ms = performance.now() - t0;
    return { status: r.status, ms, code: r.text.startsWith('{') ? (JSON.parse(r.text) as { error?: { code: string } }).error?.code : undefined };
  }

  async function duringOutage(known: string): Promise<void> {
    // Known key, free model: admitted, counted in this replica (onStoreError=open).
    const free = await timed(known, 'vend-flash-free');
    expect(free.status).toBe(200);
    expect(free.ms).toBeLessThan(BOUND_MS);
    // Known key, paid model: no store needed at all.
    const paid = await timed(known, 'vend-flash');
    expect(paid.status).toBe(200);
    // Unknown key: sluice cannot tell whether it is valid: 503, not 401.
    const unknown = await timed('sk-never-seen-0123456789abcdefghijkl', 'vend-flash');
    expect(unknown.status).toBe(503);
    expect(unknown.code).toBe('store_unavailable');
    expect(unknown.ms).toBeLessThan(BOUND_MS);
    // Per-replica counting still enforces the limit.
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++) statuses.push((await timed(known, 'vend-flash-free')).status);
    expect(statuses).toContain(429);
  }

  it('answers within the bound while Redis is frozen (SIGSTOP), and recovers on SIGCONT', async () => {
    redis.pause();
    try {
      await duringOutage(known);
    } finally {
      redis.resume();
    }
    await sleep(300);
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_degraded_decisions_total', { limit: 'free_tier' })).toBeGreaterThan(0);
    expect(metricValue(text, 'sluice_store_errors_total', { op: 'consume' })).toBeGreaterThan(0);
    const fresh = await h.createKey('after-pause');
    expect((await timed(fresh.key, 'vend-flash')).status).toBe(200);
  });

  it('answers within the bound while Redis is dead, and recovers by itself after a restart', async () => {
    // Another user: the first outage's per-replica counts are still in this replica's window.
    const other = (await h.createKey('outage-2')).key;
    expect((await timed(other, 'vend-flash')).status).toBe(200);
    await redis.kill();
    await duringOutage(other);
    // Still ready: the outage is every replica's, and this one still serves (docs/operations.md, Probes).
    const ready = await fetch(`${h.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: { store: { state: 'failing' } } });
    await redis.restart();
    const storeState = async () => ((await (await fetch(`${h.adminUrl}/readyz`)).json()) as { checks: { store: { state: string } } }).checks.store.state;
    await eventually(async () => (await storeState()) === 'ok', { timeoutMs: 5000, intervalMs: 100, what: 'the store to recover' });
    // The restarted Redis is empty: keys are gone, as after any data loss.
    const fresh = await h.createKey('after-restart');
    expect((await timed(fresh.key, 'vend-flash-free')).status).toBe(200);
  });

  it('forgets the refusals it remembered when Redis comes back without their counts', async () => {
    const k = (await h.createKey('refused-then-lost')).key;
    for (let i = 0; i < 20; i++) expect((await timed(k, 'vend-flash-free')).status).toBe(200);
    expect((await timed(k, 'vend-flash-free')).status).toBe(429); // remembered (for up to an hour here)
    const usage = (): Promise<number> => request(h.url, 'GET', '/api/log/token', { headers: { authorization: `Bearer ${k}` } }).then((r) => r.status);
    for (let i = 0; i < 20; i++) expect(await usage()).not.toBe(429);
    expect(await usage()).toBe(429); // this address, remembered too
    await redis.restart(); // empty: the store forgets every count
    // The same user through a new key (the old one went with the data): the store admits it, so
    // once the reconnect is seen the remembered refusal must be gone.
    let fresh: string | null = null;
    await eventually(
      async () => {
        fresh ??= (await h.createKey('refused-then-lost')).key; // throws while Redis is still coming back
        expect((await timed(fresh, 'vend-flash-free')).status).toBe(200);
      },
      { timeoutMs: 8000, intervalMs: 100 },
    );
    expect(await usage()).not.toBe(429); // the address's refusal is gone as well (401: its key went with the data)
  });
});

describe('Redis outage with limits.onStoreError=closed', () => {
  it('answers 503 for free-tier calls, quickly, and keeps paid calls working', async () => {
    const redis = await spawnRedis();
    const h = await startHarness({ store: 'redis', redisUrl: redis.url, redisCommandTimeoutMs: 100, file: { limits: { onStoreError: 'closed' } } });
    try {
      const { key } = await h.createKey('closed');
      expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      redis.pause();
      const t0 = performance.now();
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
      expect(performance.now() - t0).toBeLessThan(600);
      expect(r.status).toBe(503);
      expect(JSON.parse(r.text).error.code).toBe('store_unavailable');
      const p = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
      expect(p.status).toBe(200);
    } finally {
      redis.resume();
      await h.close();
      await redis.kill();
    }
  });
});
