/**
 * The dashboard and the alert rules against the real thing: a sluice process (on Redis, with the
 * relay's database as a key source) under traffic, scraped every second by a real Prometheus that
 * also loads alerts.yaml. Then, through Prometheus's HTTP API:
 * - every query of every dashboard panel returns data (no dead panel);
 * - every alert expression evaluates, and each series selector in it matches series: the logic of
 *   an alert (its threshold, its `for`) is proven by promtool's unit tests on synthetic series
 *   (files.test.ts); what a real sluice adds is that the names and label values it selects exist.
 *   An alert's whole expression is empty on a healthy sluice, as it should be, so it cannot say that;
 * - every metric name in any expression is one sluice's /metrics exports (read mechanically from
 *   the expressions);
 * - Prometheus's rule manager evaluates every rule without error.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { request } from '../support/http.js';
import { alertRules, dashboardQueries, OBSERVABILITY, PROMETHEUS, warnMissing } from '../support/observability.js';
import { selectors } from '../support/promql.js';
import { uniquePrefix } from '../support/redis.js';
import { createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { eventually, GiveUp, sleep } from '../support/time.js';

interface QueryResult {
  status: string;
  error?: string;
  data?: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> };
}

/** A Prometheus of the test's own: temporary storage, a free port, a 1 s scrape of `target`. */
async function startPrometheus(target: string): Promise<{ url: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-prometheus-'));
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [join(OBSERVABILITY, 'alerts.yaml')],
      scrape_configs: [{ job_name: 'sluice', static_configs: [{ targets: [target] }] }],
    }),
  );
  const child: ChildProcess = spawn(PROMETHEUS!, [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, '--web.listen-address=127.0.0.1:0', '--log.level=info'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let log = '';
  child.stderr!.on('data', (b: Buffer) => (log = (log + b.toString('utf8')).slice(-20_000)));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
    rmSync(dir, { recursive: true, force: true });
  };
  let address: string | undefined;
  try {
    await eventually(
      () => {
        address ??= /msg="Listening on" address=(127\.0\.0\.1:\d+)/.exec(log)?.[1];
        if (child.exitCode !== null) throw new GiveUp(`prometheus exited (${child.exitCode})`);
        return address !== undefined && log.includes('Server is ready to receive web requests');
      },
      { timeoutMs: 15_000, what: 'prometheus to be ready' },
    );
  } catch (err) {
    await stop();
    throw new Error(`prometheus did not start: ${(err as Error).message}\n${log}`);
  }
  return { url: `http://${address}`, stop };
}

const PROMETHEUS_TITLE = PROMETHEUS ? 'a real Prometheus scraping a sluice under traffic' : 'a real Prometheus (SKIPPED: prometheus is not on PATH)';

describe.skipIf(!PROMETHEUS)(PROMETHEUS_TITLE, () => {
  let relay: RelayStandin;
  let fx: RelayDbFixture;
  let sluice: ChildSluice;
  let prom: { url: string; stop(): Promise<void> };
  let exported: Set<string>;

  const query = async (q: string): Promise<QueryResult> => (await (await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(q)}`)).json()) as QueryResult;

  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    fx = await createRelayDb('sqlite');
    sluice = await startChildSluice({
      relayUrl: relay.url,
      config: { freeTier: { perMinute: 2 }, redis: { keyPrefix: uniquePrefix('prom') } },
      env: { SLUICE_REDIS_URL: inject('redisUrl'), SLUICE_RELAY_DB: fx.dsn },
    });
    prom = await startPrometheus(new URL(sluice.adminUrl).host);
    // The first scrape, before any traffic: every counter's 0 is in Prometheus.
    await eventually(async () => ((await query('up{job="sluice"} == 1')).data?.result.length ?? 0) > 0, {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: 'Prometheus to scrape sluice',
    });

    // Traffic: paid and free calls of a sluice key and of a key in the relay's database, a
    // free-tier refusal, an unknown key, a query endpoint.
    const registryKey = await sluice.createKey('prom-user');
    const relayKey = `sk-${(await fx.addToken(await fx.addUser())).key}`;
    const call = (key: string, model: string) =>
      request(sluice.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model }) });
    const statuses: number[] = [];
    for (const key of [registryKey, relayKey]) {
      statuses.push((await call(key, 'gpt-4o')).status);
      for (let i = 0; i < 3; i++) statuses.push((await call(key, 'vend-flash-free')).status);
    }
    statuses.push((await call('sk-unknown-key-of-nobody-0123456789', 'gpt-4o')).status);
    statuses.push((await request(sluice.url, 'GET', '/api/status', { headers: { authorization: `Bearer ${registryKey}` } })).status);
    expect(statuses).toEqual([200, 200, 200, 429, 200, 200, 200, 429, 401, 200]);
    exported = new Set([...(await (await fetch(`${sluice.adminUrl}/metrics`)).text()).matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/gm)].map((m) => m[1]!));

    // Scraped after the traffic, and once more so that every rate has two samples that differ.
    await eventually(async () => ((await query('sluice_requests_total{outcome="free_tier_minute"} > 0')).data?.result.length ?? 0) > 0, {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: 'Prometheus to see the traffic',
    });
    await sleep(1500);
  }, 60_000);

  afterAll(async () => {
    await prom?.stop();
    await sluice?.close();
    await relay?.close();
    await fx?.drop();
  });

  it('every metric name in the dashboard and the alerts is one sluice exports', () => {
    const exprs = [...dashboardQueries().map((q) => q.expr), ...alertRules().map((r) => r.expr)];
    const unknown = new Set(exprs.flatMap((e) => selectors(e).map((s) => s.name)).filter((n) => !exported.has(n)));
    expect([...unknown]).toEqual([]);
  });

  it('every query of every dashboard panel returns data', async () => {
    const dead: string[] = [];
    for (const { where, expr } of dashboardQueries()) {
      const r = await query(expr);
      const values = r.data?.result.map((s) => Number(s.value[1])) ?? [];
      if (r.status !== 'success') dead.push(`${where}: ${r.error}`);
      else if (!values.some(Number.isFinite)) dead.push(`${where}: ${values.length ? 'only NaN' : 'no series'}: ${expr}`);
    }
    expect(dead).toEqual([]);
  });

  it('every alert expression evaluates, and every series it selects exists', async () => {
    const problems: string[] = [];
    for (const rule of alertRules()) {
      const whole = await query(rule.expr);
      if (whole.status !== 'success') problems.push(`${rule.alert}: ${whole.error}`);
      for (const s of selectors(rule.expr)) {
        const r = await query(s.text);
        if (!r.data?.result.length) problems.push(`${rule.alert}: no series for ${s.text}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("Prometheus's rule manager loads every alert and evaluates it without error", async () => {
    const rules = alertRules();
    type Rule = { name: string; health: string; lastError?: string; lastEvaluation: string };
    const loaded = await eventually(
      async () => {
        const r = (await (await fetch(`${prom.url}/api/v1/rules?type=alert`)).json()) as { data: { groups: Array<{ rules: Rule[] }> } };
        const now = r.data.groups.flatMap((g) => g.rules);
        expect(now.map((l) => l.name).sort()).toEqual(rules.map((r) => r.alert).sort());
        expect(now.filter((l) => l.lastEvaluation.startsWith('0001')).map((l) => l.name)).toEqual([]);
        return now;
      },
      { timeoutMs: 5_000, intervalMs: 100, what: 'every alert loaded and evaluated once' },
    );
    expect(loaded.filter((l) => l.health !== 'ok').map((l) => `${l.name}: ${l.health} ${l.lastError ?? ''}`)).toEqual([]);
  });
});

if (!PROMETHEUS) {
  describe('a real Prometheus', () => {
    it('(skipped)', () => warnMissing('prometheus', 'the dashboard and alert queries against a running sluice'));
  });
}
