/**
 * Writes deploy/components/prometheus-rule/prometheus-rule.yaml, the PrometheusRule of the alert
 * rules in deploy/observability/alerts.yaml (the one source of truth): `npm run gen:prometheus-rule`.
 * `--check` changes nothing and exits 1 when the file is stale; test/observability fails then too.
 *
 * A tool of the repository, not of the product: it is not compiled into dist/ nor the image.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parse, stringify } from 'yaml';

export const ALERTS_PATH = new URL('../deploy/observability/alerts.yaml', import.meta.url);
export const RULE_PATH = new URL('../deploy/components/prometheus-rule/prometheus-rule.yaml', import.meta.url);

const HEADER = `# Generated from deploy/observability/alerts.yaml by \`npm run gen:prometheus-rule\`; do not edit by hand.
# sluice's alert rules for the Prometheus Operator. Its ruleSelector must match these labels: with
# kube-prometheus-stack, add the label \`release: <your release>\` in your overlay (docs/kubernetes.md).
`;

/** The PrometheusRule's text for the rules file's text. */
export function prometheusRule(alertsYaml: string): string {
  const { groups } = parse(alertsYaml) as { groups: unknown[] };
  const rule = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'sluice', labels: { 'app.kubernetes.io/name': 'new-api', 'app.kubernetes.io/component': 'sluice-alerts' } },
    spec: { groups },
  };
  return HEADER + stringify(rule, { lineWidth: 0 });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const want = prometheusRule(readFileSync(ALERTS_PATH, 'utf8'));
  if (process.argv.includes('--check')) {
    if (readFileSync(RULE_PATH, 'utf8') !== want) {
      console.error('deploy/components/prometheus-rule/prometheus-rule.yaml is stale: run npm run gen:prometheus-rule');
      process.exit(1);
    }
  } else {
    writeFileSync(RULE_PATH, want);
  }
}
