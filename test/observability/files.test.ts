/**
 * deploy/observability as an operator receives it: the alert rules load in Prometheus (promtool
 * check rules) and behave as their unit tests say (promtool test rules), every alert has a case
 * where it fires and one where it stays quiet, a runbook section and a severity; the
 * PrometheusRule of deploy/components/prometheus-rule holds exactly the rules file's groups; the
 * dashboard imports anywhere (its datasource is an input) and shows every metric sluice exports.
 * Against a running sluice and a real Prometheus: prometheus.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Metrics } from '../../src/metrics/index.js';
import { kubectlMode, KUBECTL, parseManifests } from '../deploy/k8s.js';
import { selectors } from '../support/promql.js';
import { prometheusRule, RULE_PATH } from '../../scripts/prometheus-rule.js';
import { alertRules, allPanels, dashboardQueries, OBSERVABILITY, PROMTOOL, readAlertsText, readDashboard, ROOT, warnMissing } from '../support/observability.js';

/** GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces to hyphens). */
function anchors(page: string): Set<string> {
  return new Set(
    [...readFileSync(join(ROOT, page), 'utf8').matchAll(/^#{1,6}\s+(.*?)\s*$/gm)].map((m) =>
      m[1]!
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    ),
  );
}

/** Every sluice_* metric family sluice itself defines (Node's process metrics aside). */
function sluiceMetricNames(): string[] {
  const m = new Metrics({ processMetrics: false, storeRoundTrips: true, relayDb: true });
  m.bodyBytes(
    () => 0,
    () => 0,
  );
  m.storeUp(() => 1);
  m.relayDbUp(() => 1);
  m.buildInfo({ version: '0', commit: 'x', node: 'v0' });
  m.logBytesDropped(() => 0);
  return m.registry.getMetricsAsArray().map((x) => x.name);
}

describe('metric names read out of PromQL (test/support/promql.ts)', () => {
  it('finds selectors inside aggregations, functions and binary operators, and nothing else', () => {
    const got = selectors('sum without (family, outcome) (rate(a_total{outcome=~"x|y",q="}"}[5m])) / on (instance) group_left max by (le) (b) > 0.05 and count(c offset 5m) # d');
    expect(got).toEqual([
      { name: 'a_total', text: 'a_total{outcome=~"x|y",q="}"}' },
      { name: 'b', text: 'b' },
      { name: 'c', text: 'c' },
    ]);
    expect(() => selectors('sum(rate(x[$__rate_interval]))')).toThrow(/unsubstituted/);
    expect(() => selectors('{__name__="x"}')).toThrow(/without a metric name/);
  });
});

describe('alert rules (deploy/observability/alerts.yaml)', () => {
  const rules = alertRules();

  it('every alert has a severity, a summary, a description and a runbook section in docs/operations.md', () => {
    expect(rules.length).toBeGreaterThanOrEqual(8);
    const sections = anchors('docs/operations.md');
    for (const r of rules) {
      expect(['critical', 'warning'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toBeTruthy();
      const runbook = /^docs\/operations\.md#(.+)$/.exec(r.annotations?.runbook ?? '');
      expect(runbook, `${r.alert}: runbook`).not.toBeNull();
      expect(sections.has(runbook![1]!), `${r.alert}: docs/operations.md has no section #${runbook![1]}`).toBe(true);
    }
  });

  it('covers what the issue asks for', () => {
    const exprs = rules.map((r) => r.expr).join('\n');
    for (const needle of [
      'sluice_store_up',
      'sluice_relay_db_up',
      'sluice_degraded_decisions_total',
      'upstream_error',
      'sluice_config_last_reload_successful',
      'sluice_dropped_connections_total',
      'sluice_max_connections',
      'drain_deadline',
      'sluice_log_bytes_dropped_total',
    ]) {
      expect(exprs).toContain(needle);
    }
  });

  it('every alert has a unit test where it fires and one where it does not', () => {
    const tests = (
      parse(readFileSync(join(OBSERVABILITY, 'alerts.test.yaml'), 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts?: unknown[] }> }> }
    ).tests;
    const cases = tests.flatMap((t) => t.alert_rule_test);
    for (const r of rules) {
      const mine = cases.filter((c) => c.alertname === r.alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${r.alert} never fires in alerts.test.yaml`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${r.alert} has no quiet case in alerts.test.yaml`,
      ).toBe(true);
    }
  });

  it.skipIf(!PROMTOOL)('promtool check rules accepts the file', () => {
    const r = spawnSync(PROMTOOL!, ['check', 'rules', join(OBSERVABILITY, 'alerts.yaml')], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it.skipIf(!PROMTOOL)('promtool test rules: every case of alerts.test.yaml passes', () => {
    const r = spawnSync(PROMTOOL!, ['test', 'rules', 'alerts.test.yaml'], { cwd: OBSERVABILITY, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('SUCCESS');
  });

  if (!PROMTOOL) it('promtool', () => warnMissing('promtool', 'promtool check rules / test rules'));
});

describe('the PrometheusRule Component (deploy/components/prometheus-rule)', () => {
  it('holds exactly the groups of alerts.yaml, and is what npm run gen:prometheus-rule writes', () => {
    const text = readFileSync(RULE_PATH, 'utf8');
    const rule = parse(text) as { apiVersion: string; kind: string; spec: { groups: unknown } };
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(rule.kind).toBe('PrometheusRule');
    expect(rule.spec.groups).toEqual((parse(readAlertsText()) as { groups: unknown }).groups);
    expect(text, 'stale: run npm run gen:prometheus-rule').toBe(prometheusRule(readAlertsText()));
  });

  it.skipIf(kubectlMode === 'skip')("an overlay written as docs/kubernetes.md says gets the PrometheusRule in its namespace, with the Operator's label", () => {
    if (!KUBECTL) throw new Error('kubectl is not on PATH (CI is set: the deploy tests must run)');
    // The page's block that adds the Component, as the reader copies it into their overlay.
    const block = [...readFileSync(join(ROOT, 'docs/kubernetes.md'), 'utf8').matchAll(/^( *)```yaml\n([\s\S]*?)^ *```/gm)]
      .map((m) => m[2]!.replace(new RegExp(`^${m[1]}`, 'gm'), ''))
      .find((b) => b.includes('components/prometheus-rule'));
    expect(block, 'docs/kubernetes.md shows how to add the Component').toBeDefined();
    const root = mkdtempSync(join(tmpdir(), 'sluice-rule-'));
    try {
      cpSync(join(ROOT, 'deploy'), join(root, 'deploy'), { recursive: true });
      mkdirSync(join(root, 'deploy/overlays/with-alerts'));
      const overlay = { apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', namespace: 'relay', resources: ['../../base'], ...(parse(block!) as object) };
      writeFileSync(join(root, 'deploy/overlays/with-alerts/kustomization.yaml'), JSON.stringify(overlay));
      const r = spawnSync(KUBECTL, ['kustomize', 'deploy/overlays/with-alerts'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      const rules = parseManifests(r.stdout, 'with-alerts').filter((o) => o.kind === 'PrometheusRule');
      expect(rules).toHaveLength(1);
      expect(rules[0]!.metadata.namespace).toBe('relay');
      expect(rules[0]!.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
      expect((rules[0] as unknown as { spec: { groups: unknown } }).spec.groups).toEqual((parse(readAlertsText()) as { groups: unknown }).groups);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Grafana's placeholder for the datasource chosen at import (a literal, not a template string). */
const DS_INPUT = '$' + '{DS_PROMETHEUS}';

describe('the dashboard (deploy/observability/dashboard.json)', () => {
  const d = readDashboard();

  it('imports anywhere: the datasource is an input, every panel, query and variable uses it', () => {
    expect(d.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    for (const p of allPanels(d).filter((p) => p.type !== 'row')) {
      expect(p.datasource?.uid, p.title).toBe(DS_INPUT);
      expect(p.targets?.length, `${p.title} has no query`).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.datasource?.uid, `${p.title} ${t.refId}`).toBe(DS_INPUT);
    }
    for (const v of d.templating.list) expect(v.datasource?.uid, v.name).toBe(DS_INPUT);
    const ids = allPanels(d).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('shows every metric sluice defines', () => {
    const used = new Set(dashboardQueries(d).flatMap((q) => selectors(q.expr).map((s) => s.name.replace(/_(bucket|sum|count)$/, ''))));
    const names = sluiceMetricNames();
    expect(names.length, 'metric names read from src/metrics').toBeGreaterThan(10);
    const unused = names.filter((n) => !used.has(n));
    expect(unused, 'metrics no panel shows').toEqual([]);
  });
});
