import { describe, expect, it } from 'vitest';
import { Metrics, relayBuckets } from './index.js';

/** The value of one series in the registry's text, undefined when it is not exported. */
async function value(m: Metrics, name: string, labels = ''): Promise<number | undefined> {
  const text = await m.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('metrics', () => {
  it('relay latency buckets reach the relay bound, whatever it is set to', () => {
    for (const bound of [1, 45, 120, 600, 3600, 86400]) {
      const b = relayBuckets(bound);
      expect(b.at(-1)).toBe(bound);
      expect([...b].sort((x, y) => x - y)).toEqual(b);
      expect(new Set(b).size).toBe(b.length);
    }
    expect(relayBuckets(600).slice(-3)).toEqual([120, 300, 600]);
    // No bound at all: the buckets go to the largest bound the setting allows (a day).
    expect(relayBuckets(0).at(-1)).toBe(86400);
  });

  it('reads the per-request gauges when scraped', async () => {
    const m = new Metrics({ processMetrics: false });
    m.inflight += 3;
    m.connections = 7;
    expect(await value(m, 'sluice_inflight_requests')).toBe(3);
    expect(await value(m, 'sluice_open_connections')).toBe(7);
    m.inflight--;
    expect(await value(m, 'sluice_inflight_requests')).toBe(2);
  });

  it('a reload that adds a per-IP rule exports its counters at 0, and leaves counts already made', async () => {
    const m = new Metrics({ processMetrics: false, ipRules: ['usage'] });
    m.degradedDecisions.inc({ limit: 'ip:usage' }, 2);
    expect(await value(m, 'sluice_degraded_decisions_total', 'limit="ip:search"')).toBeUndefined();
    m.limits(['usage', 'search']);
    expect(await value(m, 'sluice_degraded_decisions_total', 'limit="ip:search"')).toBe(0);
    expect(await value(m, 'sluice_remembered_refusals_total', 'limit="ip:search"')).toBe(0);
    expect(await value(m, 'sluice_shadow_rejections_total', 'limit="ip:search",reason="window"')).toBe(0);
    expect(await value(m, 'sluice_degraded_decisions_total', 'limit="ip:usage"')).toBe(2);
  });

  it('counts the log bytes dropped as the logger reports them, from 0', async () => {
    const m = new Metrics({ processMetrics: false });
    let dropped = 0;
    m.logBytesDropped(() => dropped);
    expect(await value(m, 'sluice_log_bytes_dropped_total')).toBe(0);
    dropped = 4096;
    expect(await value(m, 'sluice_log_bytes_dropped_total')).toBe(4096);
    dropped = 5000;
    expect(await value(m, 'sluice_log_bytes_dropped_total')).toBe(5000);
    expect(await value(m, 'sluice_log_bytes_dropped_total')).toBe(5000);
  });

  it('says whether the last config reload was applied', async () => {
    const m = new Metrics({ processMetrics: false });
    expect(await value(m, 'sluice_config_last_reload_successful')).toBe(1);
    m.configReloaded(false);
    expect(await value(m, 'sluice_config_last_reload_successful')).toBe(0);
    expect(await value(m, 'sluice_config_reloads_total', 'result="failure"')).toBe(1);
    m.configReloaded(true);
    expect(await value(m, 'sluice_config_last_reload_successful')).toBe(1);
    expect(await value(m, 'sluice_config_reloads_total', 'result="success"')).toBe(1);
  });

  it('two instances in one process keep their figures apart', async () => {
    const a = new Metrics({ processMetrics: false });
    const b = new Metrics({ processMetrics: false });
    a.countRequest('chat', 'admitted');
    a.observeRelay('chat', 0.2);
    expect(await value(a, 'sluice_requests_total', 'family="chat",outcome="admitted"')).toBe(1);
    expect(await value(b, 'sluice_requests_total', 'family="chat",outcome="admitted"')).toBe(0);
    expect(await value(a, 'sluice_relay_seconds_bucket', 'le="0.25",family="chat"')).toBe(1);
    expect(await value(a, 'sluice_relay_seconds_bucket', 'le="0.1",family="chat"')).toBe(0);
  });
});
