/**
 * Wires the parts into a running sidecar: a public listener (the gateway) and
 * an admin listener, over one store, one clock, one metrics registry and a
 * policy that config reloads swap atomically.
 */
import http, { type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { createAdminHandler } from './admin/server.js';
import { SocketRefusals, socketRefusalBytes, type SocketRefusal } from './answers/refusals.js';
import { lookupKeyOwner } from './admin/key-lookup.js';
import { KeyService } from './admin/keys.js';
import { Authenticator, storeKeySource, type AuthenticatorOptions, type KeySource } from './auth/authenticator.js';
import { LookupGuard } from './auth/lookup-guard.js';
import { relayKeySourceFor, type RelayKeySource } from './auth/relay-db/source.js';
import { BodyBudget } from './http/body-budget.js';
import { systemClock, type Clock } from './runtime/clock.js';
import { ADMIN_MAX_CONNECTIONS, connectionCap, openFileLimit } from './http/connections.js';
import { MAX_CONNECTIONS_CAP, publicConfig, type Config } from './config/index.js';
import { ConfigWatcher } from './config/watch.js';
import { Forwarder } from './forward/proxy.js';
import { createGateway } from './gateway.js';
import { GuardedLimits } from './limits/guard.js';
import { OutageLedger } from './limits/outage-ledger.js';
import { createLogger } from './log/index.js';
import { Metrics } from './metrics/index.js';
import { exposedGc, startIdleCollection, type IdleCollectionOptions } from './runtime/idle-gc.js';
import { buildInfo } from './runtime/version.js';
import { applyReload, buildPolicy, forgetSubject, type Policy } from './limits/policy.js';
import { StoreHealth } from './store/health.js';
import { MemoryStore } from './store/memory.js';
import { RedisStore, redisStoreOptions } from './store/redis/index.js';
import type { Store } from './store/types.js';

export interface SluiceOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** Supply a store (tests); otherwise Redis when configured, else the embedded store. */
  store?: Store;
  auth?: AuthenticatorOptions;
  /** Watch this config file and apply valid changes (npm start passes SLUICE_CONFIG). */
  configFile?: { path: string; env: NodeJS.ProcessEnv; pollMs?: number };
  /** Collect Node process metrics (off in tests that start many instances). */
  processMetrics?: boolean;
  /**
   * The idle collection (src/runtime/idle-gc.ts): by default `globalThis.gc` when Node runs with
   * `--expose-gc` (src/runtime/node-flags.ts), with the thresholds there; tests supply their own.
   */
  idleGc?: Omit<IdleCollectionOptions, 'served' | 'inflight'>;
  /** The descriptor limit the connection cap is derived from (tests); default: this process's, from /proc/self/limits. */
  openFileLimit?: number | null;
}

export interface Sluice {
  readonly store: Store;
  /** The relay's database as a key source, when `relayDb.url` is set. */
  readonly relayKeys: RelayKeySource | null;
  readonly keys: KeyService;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly publicServer: Server;
  readonly adminServer: Server;
  /** Client connections the public listener accepts at most (at start-up; a reload may change it). */
  readonly maxConnections: number;
  /** The config in force now (changes on reload). */
  config(): Config;
  /** Starts both listeners; resolves with the ports actually bound. */
  listen(): Promise<{ port: number; adminPort: number }>;
  /**
   * Graceful stop: readiness false at once, no new connections, in-flight requests and streams
   * get up to `drainSeconds`, then what is left is cut (outcome `drain_deadline`). Started once:
   * every later call resolves with the first one.
   */
  drain(): Promise<{ forced: number }>;
  close(): Promise<void>;
}

/** The public listener's timeouts (Node's server options), from `server.*`. */
function serverTimeouts(c: Config): { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number } {
  return {
    headersTimeout: c.server.headersTimeoutSeconds * 1000,
    requestTimeout: c.server.requestTimeoutSeconds * 1000,
    keepAliveTimeout: c.server.keepAliveTimeoutSeconds * 1000,
  };
}

export function createStore(config: Config, log: Logger): Store {
  if (config.redis.url) return new RedisStore(redisStoreOptions(config.redis, config.redis.url));
  log.warn('SLUICE_REDIS_URL is not set: using the embedded in-process store. Keys and limits live in this process only; run exactly one replica.');
  return new MemoryStore();
}

export function createSluice(opts: SluiceOptions): Sluice {
  let config = opts.config;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  const store = opts.store ?? createStore(config, log);
  const metrics = new Metrics({
    processMetrics: opts.processMetrics,
    relayTimeoutSeconds: config.upstream.headersTimeoutSeconds,
    storeRoundTrips: store.kind === 'redis',
    relayDb: config.relayDb.dsn !== null,
    ipRules: config.ipLimits.map((r) => r.name),
  });
  const build = buildInfo();
  metrics.buildInfo(build);
  const gc = exposedGc();
  const idleGc = opts.idleGc ?? (gc && { collect: gc });
  const stopIdleCollection = idleGc
    ? startIdleCollection({ served: () => metrics.served, inflight: () => metrics.inflight, ...idleGc }, () => clock.now(), () =>
        log.debug({ heapUsedMB: Math.round(process.memoryUsage().heapUsed / 1048576) }, 'idle after traffic: garbage collected'),
      )
    : undefined;
  const storeHealth = new StoreHealth(store, () => clock.now(), log);
  const outage = new OutageLedger(store, metrics, log, () => clock.now());
  const limits = new GuardedLimits(store, metrics, () => config.limits.onStoreError, outage);
  // Once the store answers again, what this replica admitted on its own meanwhile joins its counts.
  storeHealth.onAnswer(() => void outage.replay());
  metrics.storeUp(() => (storeHealth.get().state === 'ok' ? 1 : 0));
  let policy: Policy = buildPolicy(config, limits, clock);
  // A store that reconnected may have lost counts (a Redis restarted without persistence): the
  // refusals kept from before could refuse calls it would now admit.
  store.onReconnect(() => {
    policy.freeTier.forgetRefusals();
    policy.ipLimiter.forgetRefusals();
  });
  // An operator reset a subject's limits (here or on another replica): what this replica keeps of
  // it, refusals and outage counts, goes at once.
  store.onLimitsReset((e) => {
    forgetSubject(policy, e);
    if (e.type === 'reset') limits.forget(e.subject);
  });
  // The embedded store makes no round trip: only Redis lookups are timed (sluice_store_seconds).
  const timed = store.kind === 'redis' ? <T>(fn: () => Promise<T>): Promise<T> => metrics.timeStore('find_key', fn) : undefined;
  const relayKeys = relayKeySourceFor(config.relayDb, clock, log, (op, seconds, failed) => {
    metrics.relayDbSeconds.observe({ op }, seconds);
    if (failed) metrics.relayDbErrors.inc({ op });
  });
  if (relayKeys) metrics.relayDbUp(() => (relayKeys.health().state === 'ok' ? 1 : 0));
  // The relay's database first: it is authoritative for the keys it holds (a key it refuses is
  // refused, whatever sluice's registry says); the registry answers for keys it does not hold.
  const sources: KeySource[] = [storeKeySource(store, timed)];
  if (relayKeys) sources.unshift(relayKeys);
  // Lookups of unknown keys are bounded where they cost a round trip (Redis, the relay's database);
  // in the embedded store a lookup costs nothing.
  const guard = relayKeys !== null || store.kind === 'redis' ? new LookupGuard(() => config.auth, clock, log) : undefined;
  const authenticator = new Authenticator(sources, clock, { guard, ...opts.auth });
  const budget = new BodyBudget(config.bodyBudgetBytes);
  metrics.bodyBytes(
    () => budget.used,
    () => budget.limit,
  );
  // A descriptor shortage seen toward the relay keeps readiness false for a while, so that traffic goes elsewhere.
  let outOfSocketsAt = -Infinity;
  const forwarder = new Forwarder({
    upstream: config.upstream.url,
    openStreams: metrics.openStreams,
    headersTimeoutSeconds: config.upstream.headersTimeoutSeconds,
    onOutOfSockets: () => {
      outOfSocketsAt = performance.now();
      metrics.outOfSockets.inc();
    },
  });
  const keys = new KeyService(store, clock, (hash) => authenticator.onChange({ type: 'deleted', hash }));
  let draining = false;
  /** Set once a drain's bound passed: what is cut from then on is sluice's doing (drain_deadline), not the client's. */
  let cutting = false;

  const gateway = createGateway({
    clock,
    log,
    metrics,
    authenticator,
    forwarder,
    policy: () => policy,
    draining: () => draining,
    cutting: () => cutting,
    budget,
  });
  const publicServer = http.createServer(
    {
      noDelay: true,
      // Node checks these bounds on one interval over all connections (no timer per request): every second, so a bound is kept to within one.
      connectionsCheckingInterval: 1000,
      ...serverTimeouts(config),
    },
    gateway,
  );
  // A stream may stay silent for minutes while a model reasons: no idle cut-off on the response side.
  publicServer.timeout = 0;
  const nofile = opts.openFileLimit === undefined ? openFileLimit() : opts.openFileLimit;
  const cap = connectionCap(config.server.maxConnections, nofile, MAX_CONNECTIONS_CAP);
  if (cap.warning) log.warn({ maxConnections: cap.cap, openFileLimit: nofile }, cap.warning);
  // Over the cap Node closes a new connection as it arrives, before reading anything: no answer, no
  // descriptor held. Clients (and load balancers) see a connection error and retry, elsewhere if they can.
  publicServer.maxConnections = cap.cap;
  metrics.maxConnections.set(cap.cap);
  publicServer.on('drop', () => metrics.droppedConnections.inc());
  const onSocketClose = (): void => void metrics.connections--;
  publicServer.on('connection', (socket: Socket) => {
    metrics.connections++;
    socket.once('close', onSocketClose);
  });
  // `Expect: 100-continue`: the client is invited to send its body only once sluice would read it.
  publicServer.on('checkContinue', gateway.checkContinue);
  publicServer.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // The response of a request still arriving (its body, mostly), if any.
    const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage ?? null;
    let refusal: SocketRefusal;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      metrics.requestTimeouts.inc();
      // A request the gateway is reading gets the relay's JSON shape and its access line.
      if (inFlight !== null && gateway.requestTimedOut(inFlight, config.server.requestTimeoutSeconds)) return;
      refusal = SocketRefusals.HEADERS_TIMEOUT;
      log.debug({ code: err.code }, 'request headers not received in time');
    } else {
      refusal = err.code === 'HPE_HEADER_OVERFLOW' ? SocketRefusals.HEADERS_TOO_LARGE : SocketRefusals.MALFORMED;
      log.debug({ err: err.message, code: err.code }, 'malformed request from client');
    }
    if (socket.writable && !socket.destroyed && (inFlight === null || !inFlight.headersSent)) {
      // Closed once written: a client that never closes its side must not keep the connection (and a place under the cap).
      socket.end(socketRefusalBytes(refusal), () => socket.destroy());
    } else {
      socket.destroy();
    }
  });

  const admin = createAdminHandler({
    log,
    adminToken: config.adminToken,
    keys,
    lookupKey: (key) => lookupKeyOwner(authenticator, key),
    limits: () => policy,
    ready: async () => {
      // Whether this replica can serve, not whether a shared dependency is up: not ready until the
      // store (and the relay's database) answered once since start, so a wrong address keeps a new
      // Pod out; an outage after that is reported (here, sluice_store_up, sluice_relay_db_up) but
      // would take every replica out at once while they still serve (docs/operations.md, Probes).
      await storeHealth.probe(); // the body says how the store is now (a PING, bounded by redis.commandTimeoutMs)
      const s = storeHealth.get();
      const checks: Record<string, unknown> = { store: { kind: store.kind, state: s.state, since: new Date(s.since).toISOString(), error: s.error } };
      const full = saturation();
      let ready = !draining && full === null && s.state !== 'starting';
      if (relayKeys) {
        const h = relayKeys.health();
        checks.relayDb = { state: h.state, since: new Date(h.since).toISOString(), database: h.database, schema: h.schema, error: h.error };
        if (h.state === 'starting') ready = false;
      }
      if (draining) checks.draining = true;
      if (full !== null) checks.connections = full;
      return { ready, checks };
    },
    effectiveConfig: () => publicConfig(config),
    metrics,
  });
  const adminServer = http.createServer({ headersTimeout: 15_000, requestTimeout: 30_000, connectionsCheckingInterval: 1000 }, admin);
  adminServer.maxConnections = ADMIN_MAX_CONNECTIONS;
  const OUT_OF_SOCKETS_UNREADY_MS = 5000;
  /**
   * Why the replica should get no new traffic for now (readiness false, so that the Service sends
   * it elsewhere): it holds as many connections as it takes, or it recently had no descriptor
   * left to reach the relay with. Null when neither.
   */
  function saturation(): string | null {
    if (metrics.connections >= publicServer.maxConnections) return 'at the connection cap';
    if (performance.now() - outOfSocketsAt < OUT_OF_SOCKETS_UNREADY_MS) return 'out of sockets toward the relay';
    return null;
  }

  const watcher = opts.configFile
    ? new ConfigWatcher({
        ...opts.configFile,
        onReload: (next) => {
          const { config: merged, ignored } = applyReload(config, next);
          if (ignored.length) log.warn({ settings: ignored }, 'config reload: these settings only change on restart; keeping the running values');
          policy = buildPolicy(merged, limits, clock);
          config = merged;
          Object.assign(publicServer, serverTimeouts(merged));
          const nextCap = connectionCap(merged.server.maxConnections, nofile, MAX_CONNECTIONS_CAP);
          if (nextCap.warning && nextCap.cap !== publicServer.maxConnections) log.warn({ maxConnections: nextCap.cap, openFileLimit: nofile }, nextCap.warning);
          // Connections already open over a lowered cap stay; new ones wait for room.
          publicServer.maxConnections = nextCap.cap;
          metrics.maxConnections.set(nextCap.cap);
          metrics.limits(merged.ipLimits.map((r) => r.name));
          budget.limit = merged.bodyBudgetBytes;
          forwarder.setHeadersTimeout(merged.upstream.headersTimeoutSeconds);
          log.level = merged.logLevel;
          metrics.configReloaded(true);
          log.info({ config: publicConfig(merged) }, 'config reloaded');
        },
        onError: (err) => {
          metrics.configReloaded(false);
          log.error({ err: err.message }, 'config reload rejected; keeping the running config');
        },
      })
    : null;

  const listenOn = (s: Server, port: number, host: string): Promise<number> =>
    new Promise((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, host, () => {
        s.off('error', reject);
        resolve((s.address() as AddressInfo).port);
      });
    });

  const stopListening = (s: Server): Promise<void> =>
    new Promise((resolve) => {
      if (!s.listening) return resolve();
      s.close(() => resolve());
      s.closeIdleConnections();
    });

  async function drainNow(): Promise<{ forced: number }> {
    draining = true;
    const deadline = Date.now() + config.drainSeconds * 1000;
    log.info({ drainSeconds: config.drainSeconds }, 'draining: not ready, no new connections');
    const closedPublic = stopListening(publicServer);
    // Idle keep-alive connections go now; busy ones close after their current answer.
    const idleSweep = setInterval(() => publicServer.closeIdleConnections(), 250);
    const done = await Promise.race([
      closedPublic.then(() => true),
      new Promise<false>((r) => setTimeout(() => r(false), Math.max(0, deadline - Date.now())).unref()),
    ]);
    clearInterval(idleSweep);
    let forced = 0;
    if (!done) {
      forced = metrics.inflight;
      log.warn({ forced, drainSeconds: config.drainSeconds }, 'drain deadline passed; cutting what is still open (outcome drain_deadline)');
      cutting = true;
      publicServer.closeAllConnections();
      // Their relay requests are aborted as the connections close: then nothing is in flight toward
      // the relay. (Bounded, as every wait: the sockets are destroyed already, so this takes a tick.)
      await Promise.race([closedPublic, new Promise((r) => setTimeout(r, 1000).unref())]);
    }
    return { forced };
  }

  let drained: Promise<{ forced: number }> | null = null;
  let closed = false;
  const sluice: Sluice = {
    store,
    relayKeys,
    keys,
    log,
    metrics,
    publicServer,
    adminServer,
    maxConnections: cap.cap,
    config: () => config,
    async listen() {
      const port = await listenOn(publicServer, config.port, config.host);
      const adminPort = await listenOn(adminServer, config.adminPort, config.adminHost);
      // Without a listener an error on a listening server (an accept that failed) would end the process.
      for (const s of [publicServer, adminServer]) s.on('error', (err: Error) => log.error({ err: err.message }, 'listener error'));
      watcher?.start();
      relayKeys?.start();
      storeHealth.start();
      log.info(
        { ...build, port, adminPort, upstream: config.upstream.url.origin, store: store.kind, maxConnections: cap.cap, openFileLimit: nofile, bodyBudgetBytes: config.bodyBudgetBytes },
        'sluice listening',
      );
      return { port, adminPort };
    },
    drain() {
      // Whatever asks first (the Pod's shutdown hook, SIGTERM) starts it; a later ask waits for the same one.
      drained ??= drainNow();
      return drained;
    },
    async close() {
      if (closed) return;
      closed = true;
      draining = true;
      watcher?.stop();
      storeHealth.stop();
      stopIdleCollection?.();
      publicServer.closeAllConnections();
      adminServer.closeAllConnections();
      await Promise.all([stopListening(publicServer), stopListening(adminServer)]);
      forwarder.close();
      await relayKeys?.close();
      await store.close();
    },
  };
  return sluice;
}
