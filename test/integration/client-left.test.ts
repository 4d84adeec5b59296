/**
 * A client that leaves while sluice waits on the limit store (a slow Redis, an SDK's short
 * timeout): its call ends there. Nothing goes to the relay, its one access line says
 * client_aborted, and nothing of it lingers: it once sat on the relay-headers wait list until
 * upstream.headersTimeoutSeconds ran out and was then reported as a relay that did not answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/store/memory.js';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue, usedToday } from '../support/helpers.js';
import { capturedLog } from '../support/log.js';
import { sleep } from '../support/time.js';

/** The in-process store, answering each decision after 300 ms. */
class SlowStore extends MemoryStore {
  override async consume(...args: Parameters<MemoryStore['consume']>): ReturnType<MemoryStore['consume']> {
    await sleep(300);
    return super.consume(...args);
  }
}

describe('a client that leaves while the limit store decides', () => {
  const logs = capturedLog();
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', memoryStore: new SlowStore(), log: logs.log, file: { upstream: { headersTimeoutSeconds: 1 } } });
  });
  afterAll(() => h?.close());

  it.each([
    ['a free-tier call', 'POST', '/v1/chat/completions', '{"model":"vend-flash-free","messages":[]}'],
    ['a call under a per-IP rule', 'GET', '/api/log/token', ''],
  ])(
    '%s: nothing forwarded, one client_aborted line, no relay timeout reported later',
    async (_what, method, path, body) => {
      const { key } = await h.createKey(`left-${method}`);
      logs.clear();
      const started = h.relay.started;
      const left = await fetch(`${h.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body || undefined,
        signal: AbortSignal.timeout(100),
      }).catch((e: Error) => e.name);
      expect(left).toBe('TimeoutError');
      // Past the store's answer and past the relay-headers bound (1 s, swept every second).
      await sleep(2500);
      expect(h.relay.started - started).toBe(0);
      const lines = logs.lines.filter((l) => l.msg !== 'admin action');
      expect(lines.filter((l) => l.msg === 'request').map((l) => l.decision)).toEqual(['client_aborted']);
      expect(lines.map((l) => l.msg)).not.toContain('relay did not answer in time; its request was aborted');
    },
    10_000,
  );

  it('the free call it left was admitted and counted: in the store and in sluice_free_tier_admissions_total alike', async () => {
    const { key } = await h.createKey('left-counted');
    const admissions = async (): Promise<number> => metricValue(await metricsText(h), 'sluice_free_tier_admissions_total') ?? 0;
    const before = await admissions();
    const left = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"model":"vend-flash-free","messages":[]}',
      signal: AbortSignal.timeout(100),
    }).catch((e: Error) => e.name);
    expect(left).toBe('TimeoutError');
    await sleep(500);
    expect(await usedToday(h, 'left-counted')).toBe(1);
    expect((await admissions()) - before).toBe(1);
  });
});
