/**
 * Two replicas whose clocks read a few milliseconds apart (NTP keeps them close, not equal; or one
 * read its clock a moment later), sharing one Redis (a helper's probe, issue 28). The replica
 * reading later trimmed from the window, by its own time, calls that the other's decision still
 * had to count: 21 calls were admitted within one window by their own timestamps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { ManualClock } from '../support/clock.js';
import { startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';

describe('a rolling window over replicas whose clocks differ a little', () => {
  const T = Date.UTC(2026, 5, 1, 4, 0, 0);
  const early = new ManualClock(T);
  const late = new ManualClock(T);
  let relay: RelayStandin;
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    const prefix = uniquePrefix('window-skew');
    // Refusals answered from memory would hide what Redis decides.
    const file = { limits: { rememberRefusalsSeconds: 0 } };
    a = await startHarness({ store: 'redis', relay, prefix, clock: early, file });
    b = await startHarness({ store: 'redis', relay, prefix, clock: late, file });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await relay?.close();
  });

  it('never admits more than the limit within one window by the calls own times, whichever replica asks first', async () => {
    const { key } = await a.createKey('skewed');
    const free = (h: Harness) =>
      request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash-free' }) });
    for (let i = 0; i < 20; i++) expect((await free(a)).status).toBe(200);
    // B's clock reads 5 ms later than A's: at B's T + 60 s the 20 calls have left its window...
    late.set(T + 60_000);
    expect((await free(b)).status).toBe(200);
    // ...not A's, at T + 59.995 s: with them and B's call, A's window holds 21.
    early.set(T + 59_995);
    const r = await free(a);
    expect(r.status).toBe(429);
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Past A's window too, the 20 leave it, and B's one call stays.
    early.set(T + 60_001);
    expect((await free(a)).status).toBe(200);
  });
});
