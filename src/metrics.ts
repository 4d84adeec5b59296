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

  // prom-client hashes the label object on every call; the hot path resolves each label set once.
  private readonly countRequestChild = childCache((k: string) => {
    const [family, outcome] = k.split(' ') as [string, string];
    return this.requests.labels({ family, outcome });
  });
  private readonly decisionChild = childCache((family: string) => this.decisionSeconds.labels({ family }));
  private readonly relayChild = childCache((family: string) => this.relaySeconds.labels({ family }));
  private readonly storeChild = childCache((op: string) => this.storeSeconds.labels({ op }));

  countRequest(family: RouteFamily, outcome: string): void {
    this.countRequestChild(`${family} ${outcome}`).inc();
  }

  observeDecision(family: RouteFamily, seconds: number): void {
    this.decisionChild(family).observe(seconds);
  }

  observeRelay(family: RouteFamily, seconds: number): void {
    this.relayChild(family).observe(seconds);
  }

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' });
  }

  /** Times a store call and counts its failure. */
  async timeStore<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const start = performance.now();
    const c = this.storeChild(op);
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

/** Memoises `make(key)`: one labelled child per label set. */
function childCache<T>(make: (key: string) => T): (key: string) => T {
  const children = new Map<string, T>();
  return (key) => {
    let c = children.get(key);
    if (c === undefined) children.set(key, (c = make(key)));
    return c;
  };
}
