/**
 * Prometheus metrics (prom-client), one registry per sluice instance so that
 * several instances in one process (tests) do not mix their figures.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Route families: a bounded label set derived from the path. */
export type RouteFamily = 'chat' | 'responses' | 'messages' | 'gemini' | 'models' | 'usage_query' | 'api' | 'dashboard' | 'v1_other' | 'other';

export function routeFamily(path: string): RouteFamily {
  if (path.startsWith('/v1/chat/completions')) return 'chat';
  if (path.startsWith('/v1/responses')) return 'responses';
  if (path.startsWith('/v1/messages')) return 'messages';
  if (path.startsWith('/v1beta/')) return 'gemini';
  if (path === '/v1/models' || path.startsWith('/v1/models/')) return 'models';
  if (path === '/api/log/token' || path === '/api/usage/token/') return 'usage_query';
  if (path.startsWith('/api/')) return 'api';
  if (path.startsWith('/v1/dashboard/')) return 'dashboard';
  if (path.startsWith('/v1/')) return 'v1_other';
  return 'other';
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'sluice_requests_total',
    help: 'Requests by route family and outcome (admitted, unauthorized, free_tier_minute, free_tier_day, free_tier_upstream, ip_limited, too_large, upstream_error, store_unavailable, ...)',
    labelNames: ['family', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly decisionSeconds = new Histogram({
    name: 'sluice_decision_seconds',
    help: 'Time from request arrival to the admit/reject decision (body read, auth, limits)',
    labelNames: ['family'] as const,
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  readonly relaySeconds = new Histogram({
    name: 'sluice_relay_seconds',
    help: 'Time from forwarding to the relay response headers',
    labelNames: ['family'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly storeSeconds = new Histogram({
    name: 'sluice_store_seconds',
    help: 'Store (Redis) command latency by operation',
    labelNames: ['op'] as const,
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'sluice_store_errors_total',
    help: 'Store (Redis) commands that failed or timed out, by operation',
    labelNames: ['op'] as const,
    registers: [this.registry],
  });
  readonly degradedDecisions = new Counter({
    name: 'sluice_degraded_decisions_total',
    help: 'Limit decisions taken without the store (limits.onStoreError=open: counted in this replica only)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  readonly shadowRejections = new Counter({
    name: 'sluice_shadow_rejections_total',
    help: 'Calls a limit in shadow mode would have rejected (admitted anyway)',
    labelNames: ['limit', 'reason'] as const,
    registers: [this.registry],
  });
  readonly configReloads = new Counter({
    name: 'sluice_config_reloads_total',
    help: 'Config file reloads by result (success, failure)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: 'sluice_open_streams',
    help: 'Event streams (text/event-stream responses) currently open',
    registers: [this.registry],
  });
  readonly inflight = new Gauge({
    name: 'sluice_inflight_requests',
    help: 'Requests currently being handled',
    registers: [this.registry],
  });

  // prom-client hashes the label object on every call; the hot path uses cached children instead.
  private readonly requestChildren = new Map<string, { inc(): void }>();
  private readonly decisionChildren = new Map<string, { observe(v: number): void }>();
  private readonly relayChildren = new Map<string, { observe(v: number): void }>();
  private readonly storeChildren = new Map<string, { observe(v: number): void }>();

  countRequest(family: RouteFamily, outcome: string): void {
    const k = family + ' ' + outcome;
    let c = this.requestChildren.get(k);
    if (!c) this.requestChildren.set(k, (c = this.requests.labels({ family, outcome })));
    c.inc();
  }

  observeDecision(family: RouteFamily, seconds: number): void {
    let c = this.decisionChildren.get(family);
    if (!c) this.decisionChildren.set(family, (c = this.decisionSeconds.labels({ family })));
    c.observe(seconds);
  }

  observeRelay(family: RouteFamily, seconds: number): void {
    let c = this.relayChildren.get(family);
    if (!c) this.relayChildren.set(family, (c = this.relaySeconds.labels({ family })));
    c.observe(seconds);
  }

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' });
  }

  /** Times a store call and counts its failure. */
  async timeStore<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const start = performance.now();
    let c = this.storeChildren.get(op);
    if (!c) this.storeChildren.set(op, (c = this.storeSeconds.labels({ op })));
    try {
      return await fn();
    } catch (err) {
      this.storeErrors.inc({ op });
      throw err;
    } finally {
      c.observe((performance.now() - start) / 1000);
    }
  }
}
