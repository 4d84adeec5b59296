/**
 * Starts a real sluice on loopback in front of the relay stand-in, on the
 * Redis store (shared test Redis, unique key prefix) or the embedded store.
 */
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import pino from 'pino';
import { createSluice, createStore, type Sluice, type SluiceOptions } from '../../src/app.js';
import { systemClock, type Clock } from '../../src/runtime/clock.js';
import { ManualClock } from './clock.js';
import { buildConfig, type Config } from '../../src/config/index.js';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/index.js';
import type { Store } from '../../src/store/types.js';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { uniquePrefix } from './redis.js';

export type StoreKind = 'redis' | 'memory';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface Harness {
  sluice: Sluice;
  relay: RelayStandin;
  url: string;
  adminUrl: string;
  config: Config;
  clock: Clock;
  store: Store;
  /** Creates a key for `user` through the admin API; returns the wire key. */
  createKey(user: string, extra?: { key?: string; name?: string }): Promise<{ id: string; key: string }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  store: StoreKind;
  /** Config-file content (merged over nothing: defaults apply). */
  file?: Record<string, unknown>;
  env?: Record<string, string>;
  clock?: Clock;
  /** Reuse a relay (several replicas in front of one relay). */
  relay?: RelayStandin;
  /** Share a Redis key prefix between replicas. */
  prefix?: string;
  redisUrl?: string;
  redisCommandTimeoutMs?: number;
  /** Watch a config file (hot reload), as npm start does with SLUICE_CONFIG. */
  configFile?: { path: string; env: NodeJS.ProcessEnv; pollMs?: number };
  log?: import('pino').Logger;
  /** With store 'memory': this in-process store instead of a new one (a test's slowed or counting store). */
  memoryStore?: MemoryStore;
  /** Build the store from the config as npm start does (Sentinel, Cluster). */
  storeFromConfig?: boolean;
  idleGc?: SluiceOptions['idleGc'];
  /** The authenticator's cache bounds (tests that need a small cache). */
  auth?: SluiceOptions['auth'];
}

export async function startHarness(opts: HarnessOptions): Promise<Harness> {
  const relay = opts.relay ?? (await startRelayStandin({ quiet: true }));
  const clock = opts.clock ?? systemClock;
  const config = buildConfig(opts.file ?? {}, {
    SLUICE_UPSTREAM_URL: relay.url,
    SLUICE_PORT: '0',
    SLUICE_ADMIN_PORT: '0',
    SLUICE_HOST: '127.0.0.1',
    SLUICE_ADMIN_HOST: '127.0.0.1',
    SLUICE_ADMIN_TOKEN: ADMIN_TOKEN,
    ...(opts.store === 'redis' ? { SLUICE_REDIS_URL: opts.redisUrl ?? inject('redisUrl') } : {}),
    ...opts.env,
  });
  let store: Store;
  if (opts.storeFromConfig) {
    const rs = createStore(config, pino({ level: 'silent' })) as RedisStore;
    await rs.waitReady(10_000);
    store = rs;
  } else if (opts.store === 'redis') {
    const rs = new RedisStore({
      url: config.redis.url!,
      keyPrefix: opts.prefix ?? uniquePrefix('h'),
      commandTimeoutMs: opts.redisCommandTimeoutMs ?? 2000,
    });
    await rs.waitReady();
    store = rs;
  } else {
    store = opts.memoryStore ?? new MemoryStore();
  }
  const log = opts.log ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const sluice = createSluice({ config, clock, store, log, processMetrics: false, configFile: opts.configFile, idleGc: opts.idleGc, auth: opts.auth });
  const { port, adminPort } = await sluice.listen();
  const url = `http://127.0.0.1:${port}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  return {
    sluice,
    relay,
    url,
    adminUrl,
    config,
    clock,
    store,
    async createKey(user, extra = {}) {
      const r = await fetch(`${adminUrl}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user, ...extra }),
      });
      if (r.status !== 201) throw new Error(`createKey: ${r.status} ${await r.text()}`);
      return (await r.json()) as { id: string; key: string };
    },
    async close() {
      await sluice.close();
      if (!opts.relay) await relay.close();
    },
  };
}

export { ManualClock };

/**
 * One harness for the enclosing describe block: started before its tests, closed after them, the
 * relay stand-in reset after each test unless `resetRelay` is false. The returned object stands
 * for the harness once started.
 */
export function useHarness(opts: HarnessOptions, { resetRelay = true }: { resetRelay?: boolean } = {}): Harness {
  let current: Harness | undefined;
  beforeAll(async () => {
    current = await startHarness(opts);
  });
  afterAll(() => current?.close());
  if (resetRelay) afterEach(() => current?.relay.reset());
  return new Proxy({} as Harness, {
    get(_target, prop) {
      if (current === undefined) throw new Error('the harness is used before its describe block started it');
      return Reflect.get(current, prop) as unknown;
    },
  });
}

/** Runs a describe block once per store kind. */
export const STORE_KINDS: StoreKind[] = ['redis', 'memory'];
