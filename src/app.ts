/**
 * Wires the parts into a running sidecar: a public listener (the gateway) and an admin listener,
 * over one store, one clock, one metrics registry and a policy that config reloads swap
 * atomically. What each part does lives in its own module: the public listener
 * (src/http/public-server.ts), readiness (src/admin/readiness.ts), a reload
 * (src/config/reload.ts), draining and closing (src/runtime/shutdown.ts); here they are made
 * and joined, and the order in which a reload reaches them and closing stops them is listed.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { lookupKeyOwner } from './admin/key-lookup.js';
import { KeyService } from './admin/keys.js';
import { ReplicaReadiness } from './admin/readiness.js';
import { createAdminServer } from './admin/server.js';
import { Authenticator, keySources, storeKeySource, type AuthenticatorOptions } from './auth/authenticator.js';
import { LookupGuard } from './auth/lookup-guard.js';
import { relayKeySourceFor, type RelayKeySource } from './auth/relay-db/source.js';
import { publicConfig, type Config } from './config/index.js';
import { reloader } from './config/reload.js';
import { ConfigWatcher } from './config/watch.js';
import { Forwarder } from './forward/proxy.js';
import { createGateway } from './gateway.js';
import { BodyBudget } from './http/body-budget.js';
import { openFileLimit } from './http/connections.js';
import { listen, stopListening } from './http/listener.js';
import { configurePublicServer, createPublicServer } from './http/public-server.js';
import { GuardedLimits } from './limits/guard.js';
import { OutageLedger } from './limits/outage-ledger.js';
import { buildPolicy, forgetSubject, type Policy } from './limits/policy.js';
import { createLogger, droppedLogBytes } from './log/index.js';
import { Metrics } from './metrics/index.js';
import { systemClock, type Clock } from './runtime/clock.js';
import { exposedGc, startIdleCollection, type IdleCollectionOptions } from './runtime/idle-gc.js';
import { closeInOrder, drain, type CloseStep } from './runtime/shutdown.js';
import { buildInfo } from './runtime/version.js';
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

export function createStore(config: Config, log: Logger): Store {
  if (config.redis.url) return new RedisStore(redisStoreOptions(config.redis, config.redis.url));
  log.warn('SLUICE_REDIS_URL is not set: using the embedded in-process store. Keys and limits live in this process only; run exactly one replica.');
  return new MemoryStore();
}

/**
 * What one client address may hold of the bodies' budget: half of it, so that one client cannot
 * starve the rest, and never less than a body of the allowed size.
 */
function addressShare(c: Config): number {
  return Math.max(Math.floor(c.bodyBudgetBytes / 2), c.maxBodyBytes);
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
  metrics.logBytesDropped(() => droppedLogBytes(log));
  const gc = exposedGc();
  const idleGc = opts.idleGc ?? (gc && { collect: gc });
  const stopIdleCollection = idleGc
    ? startIdleCollection(
        { served: () => metrics.served, inflight: () => metrics.inflight, ...idleGc },
        () => clock.now(),
        () => log.debug({ heapUsedMB: Math.round(process.memoryUsage().heapUsed / 1048576) }, 'idle after traffic: garbage collected'),
      )
    : undefined;

  // The store, its health, and the limits decided on it.
  const storeHealth = new StoreHealth(store, () => clock.now(), log);
  const outage = new OutageLedger(store, metrics, log, () => clock.now());
  const limits = new GuardedLimits(store, metrics, () => config.limits.onStoreError, outage);
  // Once the store answers again, what this replica admitted on its own meanwhile joins its counts.
  storeHealth.onAnswer(() => void outage.replay());
  metrics.storeUp(() => (storeHealth.get().state === 'ok' ? 1 : 0));
  let policy: Policy = buildPolicy(config, limits, clock);
  // A store that reconnected may have lost counts (a Redis restarted without persistence): the
  // refusals kept from before could refuse calls it would now admit. What this replica admitted
  // on its own meanwhile goes first on the new connection.
  store.onReconnect(() => {
    forgetSubject(policy, { type: 'flush' });
    void outage.replayNow();
  });
  // An operator reset a subject's limits (here or on another replica): what this replica keeps of
  // it, refusals and outage counts, goes at once.
  store.onLimitsReset((e) => {
    forgetSubject(policy, e);
    if (e.type === 'reset') limits.forget(e.subject);
  });

  // The key sources and the authenticator in front of them.
  // The embedded store makes no round trip: only Redis lookups are timed (sluice_store_seconds).
  const timed = store.kind === 'redis' ? <T>(fn: () => Promise<T>): Promise<T> => metrics.timeStore('find_key', fn) : undefined;
  const relayKeys = relayKeySourceFor(config.relayDb, clock, log, (op, seconds, failed) => {
    metrics.relayDbSeconds.observe({ op }, seconds);
    if (failed) metrics.relayDbErrors.inc({ op });
  });
  if (relayKeys) metrics.relayDbUp(() => (relayKeys.health().state === 'ok' ? 1 : 0));
  const sources = keySources(storeKeySource(store, timed), relayKeys);
  // Lookups of unknown keys are bounded where they cost a round trip (Redis, the relay's database);
  // in the embedded store a lookup costs nothing.
  const guard = relayKeys !== null || store.kind === 'redis' ? new LookupGuard(() => config.auth, clock, log) : undefined;
  if (guard) metrics.keyLookupsWaiting(() => guard.waiting);
  const authenticator = new Authenticator(sources, clock, { guard, ...opts.auth });
  const keys = new KeyService(store, clock, (hash) => authenticator.onChange({ type: 'deleted', hash }));

  // The request path and its listener.
  let draining = false;
  /** Set once a drain's bound passed: what is cut from then on is sluice's doing (drain_deadline), not the client's. */
  let cutting = false;
  // A descriptor shortage toward the relay, or a connection closed at the cap, keeps readiness false
  // for a while, so that traffic goes elsewhere.
  const readiness = new ReplicaReadiness({
    storeKind: store.kind,
    storeHealth,
    relayKeys,
    draining: () => draining,
    connections: () => ({ open: metrics.connections, cap: publicServer.maxConnections }),
  });
  const budget = new BodyBudget(config.bodyBudgetBytes, addressShare(config));
  metrics.bodyBytes(
    () => budget.used,
    () => budget.limit,
  );
  const forwarder = new Forwarder({
    upstream: config.upstream.url,
    openStreams: metrics.openStreams,
    headersTimeoutSeconds: config.upstream.headersTimeoutSeconds,
    idleTimeoutSeconds: config.upstream.idleTimeoutSeconds,
    onOutOfSockets: () => {
      readiness.outOfSockets();
      metrics.outOfSockets.inc();
    },
  });
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
  const nofile = opts.openFileLimit === undefined ? openFileLimit() : opts.openFileLimit;
  const serverDeps = { gateway, metrics, log, config: () => config, openFileLimit: nofile, dropped: () => readiness.capReached() };
  const publicServer = createPublicServer(serverDeps);
  const maxConnections = publicServer.maxConnections;

  // The admin listener.
  const adminServer = createAdminServer({
    log,
    adminToken: config.adminToken,
    keys,
    lookupKey: (key) => lookupKeyOwner(authenticator, key),
    limits: () => policy,
    ready: () => readiness.check(),
    effectiveConfig: () => publicConfig(config),
    metrics,
  });

  // What a config reload reaches, in order.
  const watcher = opts.configFile
    ? new ConfigWatcher({
        ...opts.configFile,
        ...reloader({
          running: () => config,
          log,
          metrics,
          targets: [
            (c) => {
              config = c;
              policy = buildPolicy(c, limits, clock);
            },
            (c) => configurePublicServer(publicServer, c, serverDeps),
            (c) => metrics.limits(c.ipLimits.map((r) => r.name)),
            (c) => {
              budget.limit = c.bodyBudgetBytes;
              budget.perAddress = addressShare(c);
            },
            (c) => {
              forwarder.setHeadersTimeout(c.upstream.headersTimeoutSeconds);
              forwarder.setIdleTimeout(c.upstream.idleTimeoutSeconds);
            },
            (c) => void (log.level = c.logLevel),
          ],
        }),
      })
    : null;

  /** Node's server closes no connection it handed over as an upgrade: sessions and upgrades not switched yet are closed here. */
  const cutWebSockets = (): void => {
    forwarder.cutTunnels();
    gateway.cutUpgrades();
  };

  // How sluice stops, in order.
  const closeSteps: CloseStep[] = [
    { name: 'config watcher', run: () => watcher?.stop() },
    { name: 'store health', run: () => storeHealth.stop() },
    { name: 'idle collection', run: () => stopIdleCollection?.() },
    {
      name: 'listeners',
      run: () => {
        // What is still open now is cut by sluice (drain_deadline), not left by its client.
        cutting = true;
        publicServer.closeAllConnections();
        cutWebSockets();
        adminServer.closeAllConnections();
        return Promise.all([stopListening(publicServer), stopListening(adminServer)]);
      },
    },
    { name: 'forwarder', run: () => forwarder.close() },
    { name: 'relay keys', run: () => relayKeys?.close() },
    { name: 'store', run: () => store.close() },
  ];

  let drained: Promise<{ forced: number }> | null = null;
  let closed = false;
  return {
    store,
    relayKeys,
    keys,
    log,
    metrics,
    publicServer,
    adminServer,
    maxConnections,
    config: () => config,
    async listen() {
      const port = await listen(publicServer, config.port, config.host);
      const adminPort = await listen(adminServer, config.adminPort, config.adminHost);
      // Without a listener an error on a listening server (an accept that failed) would end the process.
      for (const s of [publicServer, adminServer]) s.on('error', (err: Error) => log.error({ err: err.message }, 'listener error'));
      watcher?.start();
      relayKeys?.start();
      storeHealth.start();
      log.info(
        { ...build, port, adminPort, upstream: config.upstream.url.origin, store: store.kind, maxConnections, openFileLimit: nofile, bodyBudgetBytes: config.bodyBudgetBytes },
        'sluice listening',
      );
      return { port, adminPort };
    },
    drain() {
      // Whatever asks first (the Pod's shutdown hook, SIGTERM) starts it; a later ask waits for the same one.
      draining = true;
      drained ??= drain(publicServer, {
        seconds: config.drainSeconds,
        log,
        inflight: () => metrics.inflight,
        onCut: () => {
          cutting = true;
          cutWebSockets();
        },
      });
      return drained;
    },
    async close() {
      if (closed) return;
      closed = true;
      draining = true;
      await closeInOrder(closeSteps, log);
    },
  };
}
