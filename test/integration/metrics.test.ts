/**
 * /metrics of a fresh sluice (Redis, the relay's database, a config file): every counter and
 * histogram whose label values are known is there at 0 before the first request, so that
 * Prometheus's increase() sees the first event; a reload's new rules appear at 0; the relay latency
 * buckets reach the relay's bound.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { createRelayDb, type RelayDbFixture } from '../support/relay-db.js';

import { eventually } from '../support/time.js';

// Written out, not imported from src: a family or outcome dropped there must fail here.
const FAMILIES = ['chat', 'responses', 'messages', 'gemini', 'models', 'usage_query', 'api', 'dashboard', 'v1_other', 'playground', 'tasks', 'other'];
const OUTCOMES = [
  'admitted',
  'unauthorized',
  'ip_limited',
  'relay_ip_limited',
  'free_tier_minute',
  'free_tier_day',
  'free_tier_upstream',
  'too_large',
  'bad_request',
  'busy',
  'request_timeout',
  'store_unavailable',
  'relay_db_unavailable',
  'upstream_error',
  'upstream_timeout',
  'out_of_sockets',
  'internal_error',
  'upstream_aborted',
  'client_aborted',
  'drain_deadline',
];

/** Every series of a fresh sluice configured as below that must read 0, as [name, labels]. */
function expectedZeros(ipRules: readonly string[]): Array<[string, Record<string, string>]> {
  const zeros: Array<[string, Record<string, string>]> = [];
  for (const family of FAMILIES) {
    for (const outcome of OUTCOMES) zeros.push(['sluice_requests_total', { family, outcome }]);
    zeros.push(['sluice_decision_seconds_count', { family }], ['sluice_relay_seconds_count', { family }], ['sluice_relay_seconds_bucket', { family, le: '+Inf' }]);
  }
  for (const limit of ['free_tier', ...ipRules.map((r) => `ip:${r}`)]) {
    zeros.push(['sluice_degraded_decisions_total', { limit }], ['sluice_remembered_refusals_total', { limit }], ['sluice_shadow_rejections_total', { limit, reason: 'window' }]);
  }
  zeros.push(['sluice_shadow_rejections_total', { limit: 'free_tier', reason: 'day' }]);
  for (const reason of ['address_budget', 'lookup_ceiling', 'lookup_queue_full']) zeros.push(['sluice_key_lookups_refused_total', { reason }]);
  for (const result of ['success', 'failure']) zeros.push(['sluice_config_reloads_total', { result }]);
  for (const op of ['consume', 'find_key']) zeros.push(['sluice_store_errors_total', { op }], ['sluice_store_seconds_count', { op }]);
  // The relay's tables are read at start-up (op schema), with or without a request.
  zeros.push(['sluice_relay_db_errors_total', { op: 'lookup' }], ['sluice_relay_db_errors_total', { op: 'schema' }], ['sluice_relay_db_seconds_count', { op: 'lookup' }]);
  for (const name of [
    'sluice_free_tier_admissions_total',
    'sluice_dropped_connections_total',
    'sluice_pipelining_closed_total',
    'sluice_request_timeouts_total',
    'sluice_out_of_sockets_total',
    'sluice_body_budget_refusals_total',
    'sluice_key_lookups_waiting',
    'sluice_log_bytes_dropped_total',
  ]) {
    zeros.push([name, {}]);
  }
  return zeros;
}

/** The series of `zeros` that do not read exactly 0 (absent ones included), as text. */
function notZero(text: string, zeros: Array<[string, Record<string, string>]>): string[] {
  return zeros.filter(([name, labels]) => metricValue(text, name, labels) !== 0).map(([name, labels]) => `${name}${JSON.stringify(labels)} = ${metricValue(text, name, labels)}`);
}

/** The finite upper bounds of `sluice_relay_seconds`'s buckets. */
function relayBounds(text: string): number[] {
  return [...text.matchAll(/^sluice_relay_seconds_bucket\{le="([^"]+)",family="chat"\}/gm)].map((m) => Number(m[1])).filter(Number.isFinite);
}

describe('a fresh sluice exports its series at 0', () => {
  let fx: RelayDbFixture;
  let h: Harness;
  let dir: string;
  let file: string;

  beforeAll(async () => {
    fx = await createRelayDb('sqlite');
    dir = mkdtempSync(join(tmpdir(), 'sluice-metrics-'));
    file = join(dir, 'config.yaml');
    writeFileSync(file, 'upstream:\n  headersTimeoutSeconds: 900\n');
    h = await startHarness({
      store: 'redis',
      env: { SLUICE_RELAY_DB: fx.dsn },
      file: { upstream: { headersTimeoutSeconds: 900 } },
      // The reloads read the environment sluice started with: the relay's URL is required.
      configFile: { path: file, env: { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:1', SLUICE_RELAY_DB: fx.dsn, SLUICE_CONFIG: file }, pollMs: 100 },
    });
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every family and outcome, limit, reason, result and operation, before any request', async () => {
    const text = await metricsText(h);
    expect(notZero(text, expectedZeros(['usage-query', 'api-and-dashboard']))).toEqual([]);
    // Exported from start; whether the start-up schema read has been timed yet is a race.
    expect(metricValue(text, 'sluice_relay_db_seconds_count', { op: 'schema' })).toBeTypeOf('number');
  });

  it('the relay latency buckets reach upstream.headersTimeoutSeconds', async () => {
    const bounds = relayBounds(await metricsText(h));
    expect(Math.max(...bounds)).toBeGreaterThanOrEqual(900);
    // Slow answers below the bound are still told apart: not all in one top bucket.
    expect(bounds).toContain(300);
  });

  it('a reload that adds a per-IP rule exports its counters at 0, and the first event then counts 1', async () => {
    writeFileSync(file, 'logLevel: silent\nupstream:\n  headersTimeoutSeconds: 900\nipLimits:\n  - { name: status, paths: [/api/status], limit: 1, windowSeconds: 60 }\n');
    const text = await eventually(
      async () => {
        const t = await metricsText(h);
        expect(metricValue(t, 'sluice_config_reloads_total', { result: 'success' })).toBe(1);
        return t;
      },
      { timeoutMs: 5000, intervalMs: 50 },
    );
    expect(
      notZero(text, [
        ['sluice_degraded_decisions_total', { limit: 'ip:status' }],
        ['sluice_shadow_rejections_total', { limit: 'ip:status', reason: 'window' }],
      ]),
    ).toEqual([]);
    expect(metricValue(text, 'sluice_config_last_reload_successful')).toBe(1);
    expect(metricValue(text, 'sluice_requests_total', { family: 'api', outcome: 'ip_limited' })).toBe(0);
    await fetch(`${h.url}/api/status`);
    expect((await fetch(`${h.url}/api/status`)).status).toBe(429);
    expect(metricValue(await metricsText(h), 'sluice_requests_total', { family: 'api', outcome: 'ip_limited' })).toBe(1);
  });
});

describe('the relay latency buckets follow the setting', () => {
  it('with the default bound (600 s) and with a short one', async () => {
    for (const [bound, file] of [
      [600, {}],
      [45, { upstream: { headersTimeoutSeconds: 45 } }],
    ] as const) {
      const h = await startHarness({ store: 'memory', file });
      try {
        const bounds = relayBounds(await metricsText(h));
        expect(Math.max(...bounds)).toBe(bound);
      } finally {
        await h.close();
      }
    }
  });
});
