/**
 * deploy/observability's files as the tests read them: the dashboard's queries, the alert rules,
 * and where Prometheus's own tools are. Debian's `prometheus` package brings `prometheus` and
 * `promtool` (.ci/run installs it); where it cannot be installed the tests that need it skip with
 * a loud warning.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { findOnPath } from './redis.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const OBSERVABILITY = join(ROOT, 'deploy/observability');

export const PROMTOOL = findOnPath('promtool');
export const PROMETHEUS = findOnPath('prometheus');

/** Skips loudly: the reader of the test output must see that these tests did not run. */
export function warnMissing(tool: string, what: string): void {
  console.warn(`\n*** WARNING: ${tool} is not on PATH: ${what} SKIPPED. Install Debian's prometheus package ` + '(apt-get install prometheus; .ci/run does) to run them. ***\n');
}

export interface Target {
  expr: string;
  refId: string;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<Target & { datasource?: { type: string; uid: string } }>;
  panels?: Panel[];
}

export interface Dashboard {
  __inputs: Array<{ name: string; type: string; pluginId: string }>;
  panels: Panel[];
  templating: { list: Array<{ name: string; datasource?: { uid: string }; query: unknown }> };
  uid: string;
  title: string;
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(join(OBSERVABILITY, 'dashboard.json'), 'utf8')) as Dashboard;
}

/** Every panel, those inside collapsed rows included. */
export function allPanels(d: Dashboard): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/**
 * Grafana's variables as a query at one instant sees them: every replica, and a rate window
 * that holds several scrapes at the tests' 1 s scrape interval.
 */
export function substitute(expr: string, rateWindow = '30s'): string {
  return expr.replaceAll('$__rate_interval', rateWindow).replaceAll('$__interval', '5s').replaceAll('$__range', '5m').replaceAll('$instance', '.*');
}

/** Every query of every panel: where it is, and its expression with the variables substituted. */
export function dashboardQueries(d: Dashboard = readDashboard()): Array<{ where: string; expr: string }> {
  return allPanels(d).flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: substitute(t.expr) })));
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function readAlertsText(): string {
  return readFileSync(join(OBSERVABILITY, 'alerts.yaml'), 'utf8');
}

export function alertRules(): AlertRule[] {
  const { groups } = parse(readAlertsText()) as { groups: Array<{ rules: AlertRule[] }> };
  return groups.flatMap((g) => g.rules);
}
