/**
 * Prometheus metrics, one registry per sluice instance so that several instances in one process
 * (tests) do not mix their figures. sluice's own instruments are in instruments.ts; prom-client
 * supplies the registry, the text format and the process metrics.
 */
import { Gauge as LabelledGauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Outcome } from '../answers/outcome.js';
import type { RouteFamily } from '../routing/routes.js';
import type { BuildInfo } from '../runtime/version.js';
import { Counter, Gauge, Histogram } from './instruments.js';

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export class Metrics {
  readonly registry = new Registry();
  readonly requests = this.add(
    new Counter(
      'sluice_requests_total',
      'Requests by route family and outcome (admitted, unauthorized, free_tier_minute, free_tier_day, free_tier_upstream, ip_limited, relay_ip_limited, too_large, upstream_error, upstream_aborted, store_unavailable, ...)',
      ['family', 'outcome'],
    ),
  );
  readonly decisionSeconds = this.add(
    new Histogram('sluice_decision_seconds', 'Time from request arrival to the admit/reject decision (body read, auth, limits)', ['family'], FAST_BUCKETS),
  );
  readonly relaySeconds = this.add(new Histogram('sluice_relay_seconds', 'Time from forwarding to the relay response headers', ['family'], LATENCY_BUCKETS));
  readonly storeSeconds = this.add(new Histogram('sluice_store_seconds', 'Store (Redis) command latency by operation', ['op'], FAST_BUCKETS));
  readonly storeErrors = this.add(new Counter('sluice_store_errors_total', 'Store (Redis) commands that failed or timed out, by operation', ['op']));
  readonly degradedDecisions = this.add(
    new Counter('sluice_degraded_decisions_total', 'Limit decisions taken without the store (limits.onStoreError=open: counted in this replica only)', ['limit']),
  );
  readonly outageReplays = this.add(
    new Counter(
      'sluice_outage_replays_total',
      'Calls admitted in memory during a store outage (limits.onStoreError=open), by what became of them once the store answered again: replayed, already_counted, expired, unknown, failed, dropped',
      ['result'],
    ),
  );
  readonly rememberedRefusals = this.add(
    new Counter('sluice_remembered_refusals_total', 'Refusals answered from memory, without asking the store (limits.rememberRefusalsSeconds)', ['limit']),
  );
  readonly keyLookupsRefused = this.add(
    new Counter(
      'sluice_key_lookups_refused_total',
      'Keys the replica did not know, refused without a lookup: address_budget (the client address spent auth.failuresPerAddress: 401) or lookup_ceiling (auth.unknownKeyLookupsPerSecond reached: 503)',
      ['reason'],
    ),
  );
  readonly shadowRejections = this.add(
    new Counter('sluice_shadow_rejections_total', 'Calls a limit in shadow mode would have rejected (admitted anyway)', ['limit', 'reason']),
  );
  readonly relayDbSeconds = this.add(
    new Histogram('sluice_relay_db_seconds', "Statements against the relay's database (lookup: one batch of keys; schema: reading its tables)", ['op'], FAST_BUCKETS),
  );
  readonly relayDbErrors = this.add(new Counter('sluice_relay_db_errors_total', "Statements against the relay's database that failed or timed out, by operation", ['op']));
  readonly configReloads = this.add(new Counter('sluice_config_reloads_total', 'Config file reloads by result (success, failure)', ['result']));
  readonly openStreams = this.add(new Gauge('sluice_open_streams', 'Event streams (text/event-stream responses) currently open'));
  readonly inflight = this.add(new Gauge('sluice_inflight_requests', 'Requests currently being handled'));
  readonly connections = this.add(new Gauge('sluice_open_connections', 'Client connections open on the public listener'));
  readonly maxConnections = this.add(new Gauge('sluice_max_connections', 'Client connections the public listener accepts at most (server.maxConnections)'));
  readonly droppedConnections = this.add(new Counter('sluice_dropped_connections_total', 'Client connections closed on arrival because maxConnections were open'));
  readonly requestTimeouts = this.add(new Counter('sluice_request_timeouts_total', 'Requests answered 408: headers or body not in within server.headersTimeoutSeconds / requestTimeoutSeconds'));
  readonly outOfSockets = this.add(new Counter('sluice_out_of_sockets_total', 'Relay connections that could not be opened for want of file descriptors (EMFILE/ENFILE)'));
  readonly bodyBudgetRefusals = this.add(new Counter('sluice_body_budget_refusals_total', 'Requests answered 503 because their body would take the bodies in flight past bodyBudgetBytes'));

  // Label sets recur on every request: each is resolved to its cell once.
  // By family, then outcome: no key string is built per request.
  private readonly requestCells = memo((family: string) => memo((outcome: string) => this.requests.cell({ family, outcome })));
  private readonly decisionCells = memo((family: string) => this.decisionSeconds.cell({ family }));
  private readonly relayCells = memo((family: string) => this.relaySeconds.cell({ family }));
  private readonly storeCells = memo((op: string) => this.storeSeconds.cell({ op }));

  /** Bytes held by request bodies in flight, and their budget (set by the app, which owns the budget). */
  bodyBytes(read: () => number, limit: () => number): void {
    this.add(new Gauge('sluice_body_bytes', 'Bytes request bodies in flight hold now, raw and decoded (counted against bodyBudgetBytes)', read));
    this.add(new Gauge('sluice_body_budget_bytes', 'bodyBudgetBytes: what request bodies in flight may hold together', limit));
  }

  /**
   * `sluice_build_info{version,commit,node} 1`: which sluice runs, joinable to any other series.
   * Set once, so prom-client's own gauge (its per-call label hashing does not matter here).
   */
  buildInfo(info: BuildInfo): void {
    new LabelledGauge({
      name: 'sluice_build_info',
      help: 'Always 1; the labels say which sluice runs: version (package.json), commit built from, Node version',
      labelNames: ['version', 'commit', 'node'],
      registers: [this.registry],
    }).set({ version: info.version, commit: info.commit, node: info.node }, 1);
  }

  /** Whether the limit store answers (the app watches it: src/store/health.ts). */
  storeUp(read: () => number): void {
    this.add(new Gauge('sluice_store_up', 'Whether the store (Redis) answered its last PING, each second: 1 yes, 0 no or not yet since start; always 1 on the embedded store', read));
  }

  /** Whether the relay's database answers (set when `relayDb.url` is). */
  relayDbUp(read: () => number): void {
    this.add(new Gauge('sluice_relay_db_up', "Whether the relay's database answered its last statement: 1 yes, 0 no or not yet since start", read));
  }

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' });
  }

  private add<M extends Counter<string> | Gauge | Histogram<string>>(m: M): M {
    // The Registry only calls `get()` (and reads `name`) on what it holds; see instruments.ts.
    this.registry.registerMetric(m as unknown as Parameters<Registry['registerMetric']>[0]);
    return m;
  }

  /**
   * Calls the relay answered since start, counted as they end: the idle collector's measure of
   * traffic, the kind its threshold was measured with (refusals do not run the whole path).
   */
  served = 0;

  countRequest(family: RouteFamily, outcome: Outcome): void {
    this.requestCells(family)(outcome).value++;
  }

  observeDecision(family: RouteFamily, seconds: number): void {
    this.decisionCells(family).observe(seconds);
  }

  observeRelay(family: RouteFamily, seconds: number): void {
    this.served++;
    this.relayCells(family).observe(seconds);
  }

  /** Times a store call and counts its failure. */
  async timeStore<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      const r = await fn();
      this.observeStore(op, start, false);
      return r;
    } catch (err) {
      this.observeStore(op, start, true);
      throw err;
    }
  }

  /** Records one settled store call that began at `start` (performance.now()). */
  observeStore(op: string, start: number, failed: boolean): void {
    this.storeCells(op).observe((performance.now() - start) / 1000);
    if (failed) this.storeErrors.inc({ op });
  }
}

/** Memoises `make(key)`. */
function memo<T>(make: (key: string) => T): (key: string) => T {
  const made = new Map<string, T>();
  return (key) => {
    let c = made.get(key);
    if (c === undefined) made.set(key, (c = make(key)));
    return c;
  };
}
