/**
 * Prometheus metrics: prom-client's own instruments, in one registry per sluice instance so that
 * several instances in one process (tests) do not mix their figures.
 *
 * Every series whose label values are known is exported from start, at 0: prom-client exports a
 * labelled series only once it has a value, and Prometheus's `increase()` and `rate()` see no
 * increase in a series' first sample, so a counter born at 1 would hide its first event (the first
 * refusal, the first relay error) from every alert. The label sets a request uses are resolved to
 * prom-client children (`labels()`) once, here, where they are created.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LOOKUP_REFUSALS } from '../auth/lookup-guard.js';
import { OUTCOMES, type Outcome } from '../answers/outcome.js';
import { DEFAULTS } from '../config/index.js';
import { FREE_TIER_LIMIT, ipRuleLimit } from '../limits/names.js';
import { REPLAY_RESULTS } from '../limits/outage-ledger.js';
import { BUSY_BOUNDS } from '../http/body-budget.js';
import { ROUTE_FAMILIES, type RouteFamily } from '../routing/routes.js';
import type { BuildInfo } from '../runtime/version.js';

/** Arrival to decision, and store and relay-database round trips: sub-millisecond to a second. */
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const RELAY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Above RELAY_BUCKETS, up to the relay's bound: reasoning models take minutes before their headers. */
const RELAY_LONG_BUCKETS = [300, 600, 1800, 3600, 7200, 21600, 43200, 86400];
/** The top bucket with no bound on the relay (`upstream.headersTimeoutSeconds: 0`): the largest bound it may have. */
const UNBOUNDED_RELAY_SECONDS = 86400;

/**
 * `sluice_relay_seconds`'s buckets: the largest finite one is the relay's bound
 * (`upstream.headersTimeoutSeconds`), so that answers slower than two minutes are still told apart
 * from the 504s at the bound.
 */
export function relayBuckets(headersTimeoutSeconds: number): number[] {
  const top = headersTimeoutSeconds === 0 ? UNBOUNDED_RELAY_SECONDS : headersTimeoutSeconds;
  return [...RELAY_BUCKETS, ...RELAY_LONG_BUCKETS].filter((b) => b < top).concat(top);
}

/** The operations of the store and the relay's database that are timed (their `op` label). */
const STORE_OPS = ['consume', 'find_key'] as const;
const RELAY_DB_OPS = ['lookup', 'schema'] as const;
/** The free tier refuses by its rolling window or its day; a per-IP rule by its window. */
const FREE_TIER_REASONS = ['window', 'day'] as const;
const IP_RULE_REASONS = ['window'] as const;

export interface MetricsOptions {
  /** Node's process and runtime metrics (off in tests that start many instances). */
  processMetrics?: boolean;
  /** `upstream.headersTimeoutSeconds` at start-up (default 600): the relay latency buckets reach it. */
  relayTimeoutSeconds?: number;
  /** The store makes round trips (Redis): its latency and errors are exported from start. */
  storeRoundTrips?: boolean;
  /** The relay's database is a key source: its statements are exported from start. */
  relayDb?: boolean;
  /** The names of the per-IP rules (`ipLimits`): their limits are exported from start. */
  ipRules?: readonly string[];
}

export class Metrics {
  readonly registry = new Registry();

  /**
   * Requests being handled now. Plain numbers where they change on every request or connection,
   * read by the gauges when Prometheus scrapes (`collect`), and by the idle collector and the drain.
   */
  inflight = 0;
  /** Client connections open on the public listener. */
  connections = 0;
  /**
   * Calls the relay answered since start, counted as they end: the idle collector's measure of
   * traffic, the kind its threshold was measured with (refusals do not run the whole path).
   */
  served = 0;

  readonly requests = new Counter({
    name: 'sluice_requests_total',
    help: 'Requests by route family and outcome (src/answers/outcome.ts: admitted, unauthorized, free_tier_minute, free_tier_day, free_tier_upstream, ip_limited, store_unavailable, relay_db_unavailable, upstream_error, drain_deadline, ...)',
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
  readonly relaySeconds: Histogram<'family'>;
  readonly freeTierAdmissions = new Counter({
    name: 'sluice_free_tier_admissions_total',
    help: 'Free-model calls the free tier admitted (its refusals are sluice_requests_total outcomes free_tier_minute and free_tier_day)',
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
  readonly outageReplays = new Counter({
    name: 'sluice_outage_replays_total',
    help: 'Calls admitted in memory during a store outage (limits.onStoreError=open), by what became of them once the store answered again: replayed, already_counted, expired, reset, unknown, failed, dropped',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly rememberedRefusals = new Counter({
    name: 'sluice_remembered_refusals_total',
    help: 'Refusals answered from memory, without asking the store (limits.rememberRefusalsSeconds)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  readonly keyLookupsRefused = new Counter({
    name: 'sluice_key_lookups_refused_total',
    help: 'Keys the replica did not know, refused without a lookup: address_budget (the client address spent auth.failuresPerAddress: 401) lookup_ceiling (503: auth.unknownKeyLookupsPerSecond reached) or lookup_queue_full (503: auth.unknownKeyLookupBurst requests already waiting for the lookups of their address)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly shadowRejections = new Counter({
    name: 'sluice_shadow_rejections_total',
    help: 'Calls a limit in shadow mode would have rejected (admitted anyway)',
    labelNames: ['limit', 'reason'] as const,
    registers: [this.registry],
  });
  readonly relayDbSeconds = new Histogram({
    name: 'sluice_relay_db_seconds',
    help: "Statements against the relay's database (lookup: one batch of keys; schema: reading its tables)",
    labelNames: ['op'] as const,
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  readonly relayDbErrors = new Counter({
    name: 'sluice_relay_db_errors_total',
    help: "Statements against the relay's database that failed or timed out, by operation",
    labelNames: ['op'] as const,
    registers: [this.registry],
  });
  readonly configReloads = new Counter({
    name: 'sluice_config_reloads_total',
    help: 'Config file reloads by result (success, failure)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly configReloadOk = new Gauge({
    name: 'sluice_config_last_reload_successful',
    help: 'Whether the last config file reload was applied: 1 yes (or none since start), 0 rejected (the running config is older than the file)',
    registers: [this.registry],
  });
  /** Counted by the forwarder as streams open and end. */
  readonly openStreams = new Gauge({
    name: 'sluice_open_streams',
    help: 'Event streams (text/event-stream responses) and WebSocket sessions currently open',
    registers: [this.registry],
  });
  readonly maxConnections = new Gauge({
    name: 'sluice_max_connections',
    help: 'Client connections the public listener accepts at most (server.maxConnections)',
    registers: [this.registry],
  });
  readonly droppedConnections = new Counter({
    name: 'sluice_dropped_connections_total',
    help: 'Client connections closed on arrival because maxConnections were open',
    registers: [this.registry],
  });
  readonly unroutedAnswers = new Counter({
    name: 'sluice_unrouted_answers_total',
    help: 'POSTs under /v1/ on no route sluice knows of the relay, which the relay answered with a success: it serves a route sluice does not read models on (not counted against the free tier)',
    registers: [this.registry],
  });
  readonly pipeliningClosed = new Counter({
    name: 'sluice_pipelining_closed_total',
    help: 'Client connections closed for having more pipelined requests in progress than allowed (32)',
    registers: [this.registry],
  });
  readonly requestTimeouts = new Counter({
    name: 'sluice_request_timeouts_total',
    help: 'Requests answered 408: headers or body not in within server.headersTimeoutSeconds / requestTimeoutSeconds',
    registers: [this.registry],
  });
  readonly outOfSockets = new Counter({
    name: 'sluice_out_of_sockets_total',
    help: 'Relay connections that could not be opened for want of file descriptors (EMFILE/ENFILE)',
    registers: [this.registry],
  });
  readonly bodyBudgetRefusals = new Counter({
    name: 'sluice_body_budget_refusals_total',
    help: 'Requests answered 503 because their body would take the bodies in flight past bodyBudgetBytes (bound: budget_full) or past their client address share of it (bound: address_share)',
    labelNames: ['bound'] as const,
    registers: [this.registry],
  });

  // The request path's label sets, resolved to children once (every one exists from start).
  private readonly requestChildren = new Map<RouteFamily, Map<Outcome, Counter.Internal>>();
  private readonly decisionChildren = new Map<RouteFamily, Histogram.Internal<'family'>>();
  private readonly relayChildren = new Map<RouteFamily, Histogram.Internal<'family'>>();
  private readonly storeChildren = new Map<string, Histogram.Internal<'op'>>();

  constructor(opts: MetricsOptions = {}) {
    this.readGauge('sluice_inflight_requests', 'Requests currently being handled', () => this.inflight);
    this.readGauge('sluice_open_connections', 'Client connections open on the public listener', () => this.connections);
    this.relaySeconds = new Histogram({
      name: 'sluice_relay_seconds',
      help: 'Time from forwarding to the relay response headers (the largest finite bucket is upstream.headersTimeoutSeconds at start-up)',
      labelNames: ['family'] as const,
      buckets: relayBuckets(opts.relayTimeoutSeconds ?? DEFAULTS.upstream.headersTimeoutSeconds),
      registers: [this.registry],
    });
    this.configReloadOk.set(1);
    for (const family of ROUTE_FAMILIES) {
      const byOutcome = new Map<Outcome, Counter.Internal>();
      for (const outcome of OUTCOMES) {
        const child = this.requests.labels({ family, outcome });
        child.inc(0);
        byOutcome.set(outcome, child);
      }
      this.requestChildren.set(family, byOutcome);
      this.decisionSeconds.zero({ family });
      this.decisionChildren.set(family, this.decisionSeconds.labels({ family }));
      this.relaySeconds.zero({ family });
      this.relayChildren.set(family, this.relaySeconds.labels({ family }));
    }
    for (const reason of LOOKUP_REFUSALS) this.keyLookupsRefused.inc({ reason }, 0);
    for (const bound of BUSY_BOUNDS) this.bodyBudgetRefusals.inc({ bound }, 0);
    for (const result of ['success', 'failure']) this.configReloads.inc({ result }, 0);
    this.limits(opts.ipRules ?? []);
    if (opts.storeRoundTrips) {
      for (const result of REPLAY_RESULTS) this.outageReplays.inc({ result }, 0);
      for (const op of STORE_OPS) {
        this.storeSeconds.zero({ op });
        this.storeErrors.inc({ op }, 0);
      }
    }
    if (opts.relayDb) {
      for (const op of RELAY_DB_OPS) {
        this.relayDbSeconds.zero({ op });
        this.relayDbErrors.inc({ op }, 0);
      }
    }
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' });
  }

  /**
   * Exports the limits' counters at 0: the free tier's and those of these per-IP rules (at start,
   * and for the rules a reload adds; a rule a reload removes keeps its series until restart).
   * Adding 0 leaves a series that already counts as it is.
   */
  limits(ipRules: readonly string[]): void {
    const limits: Array<[string, readonly string[]]> = [[FREE_TIER_LIMIT, FREE_TIER_REASONS]];
    for (const name of ipRules) limits.push([ipRuleLimit(name), IP_RULE_REASONS]);
    for (const [limit, reasons] of limits) {
      this.degradedDecisions.inc({ limit }, 0);
      this.rememberedRefusals.inc({ limit }, 0);
      for (const reason of reasons) this.shadowRejections.inc({ limit, reason }, 0);
    }
  }

  /** Bytes held by request bodies in flight, and their budget (read from the app, which owns the budget). */
  bodyBytes(read: () => number, limit: () => number): void {
    this.readGauge('sluice_body_bytes', 'Bytes request bodies in flight hold now, raw and decoded (counted against bodyBudgetBytes)', read);
    this.readGauge('sluice_body_budget_bytes', 'bodyBudgetBytes: what request bodies in flight may hold together', limit);
  }

  /** Requests waiting for their client address's key lookups in flight (src/auth/lookup-guard.ts), read when scraped. */
  keyLookupsWaiting(read: () => number): void {
    this.readGauge(
      'sluice_key_lookups_waiting',
      "Requests waiting for their client address's key lookups in flight before their own (auth.failuresPerAddress held by lookups not yet answered); at most auth.unknownKeyLookupBurst",
      read,
    );
  }

  /** Log bytes the logger could not write (src/log: stdout not read past its bound, or closed), read when scraped. */
  logBytesDropped(read: () => number): void {
    let counted = 0;
    new Counter({
      name: 'sluice_log_bytes_dropped_total',
      help: 'Bytes of log lines never written: dropped while stdout was not read and its bound (32 MiB, LOG_BUFFER_MAX_BYTES) was full, or handed after stdout closed',
      registers: [this.registry],
      collect() {
        const now = read();
        if (now > counted) this.inc(now - counted);
        counted = now;
      },
    });
  }

  /** Whether the limit store answers, read when scraped. */
  storeUp(read: () => number): void {
    this.readGauge('sluice_store_up', 'Whether the store (Redis) answered its last PING, each second: 1 yes, 0 no or not yet since start; always 1 on the embedded store', read);
  }

  /** Whether the relay's database answers (set when `relayDb.url` is), read when scraped. */
  relayDbUp(read: () => number): void {
    this.readGauge('sluice_relay_db_up', "Whether the relay's database answered its last statement: 1 yes, 0 no or not yet since start", read);
  }

  /** `sluice_build_info{version,commit,node} 1`: which sluice runs, joinable to any other series. */
  buildInfo(info: BuildInfo): void {
    new Gauge({
      name: 'sluice_build_info',
      help: 'Always 1; the labels say which sluice runs: version (package.json), commit built from, Node version',
      labelNames: ['version', 'commit', 'node'] as const,
      registers: [this.registry],
    }).set({ version: info.version, commit: info.commit, node: info.node }, 1);
  }

  /** A config file reload was applied (true) or rejected (false). */
  configReloaded(applied: boolean): void {
    this.configReloads.inc({ result: applied ? 'success' : 'failure' });
    this.configReloadOk.set(applied ? 1 : 0);
  }

  countRequest(family: RouteFamily, outcome: Outcome): void {
    this.requestChildren.get(family)!.get(outcome)!.inc();
  }

  observeDecision(family: RouteFamily, seconds: number): void {
    this.decisionChildren.get(family)!.observe(seconds);
  }

  observeRelay(family: RouteFamily, seconds: number): void {
    this.served++;
    this.relayChildren.get(family)!.observe(seconds);
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
    let child = this.storeChildren.get(op);
    if (child === undefined) this.storeChildren.set(op, (child = this.storeSeconds.labels({ op })));
    child.observe((performance.now() - start) / 1000);
    if (failed) this.storeErrors.inc({ op });
  }

  /** A gauge whose value is read from elsewhere when Prometheus scrapes. */
  private readGauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }
}
