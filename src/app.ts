/**
 * Wires the parts into a running sidecar: a public listener (the gateway) and
 * an admin listener, over one store and one clock.
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createAdminHandler } from './admin/server.js';
import { KeyService } from './admin/keys.js';
import { Authenticator, storeKeySource, type AuthenticatorOptions } from './auth/authenticator.js';
import { systemClock, type Clock } from './clock.js';
import { publicConfig, trustedProxyList, type Config } from './config.js';
import { Forwarder } from './forward/proxy.js';
import { createGateway } from './gateway.js';
import { FreeTierLimiter } from './limits/free-tier.js';
import { IpLimiter } from './limits/ip.js';
import { createLogger } from './log.js';
import { MemoryStore } from './store/memory.js';
import { RedisStore } from './store/redis.js';
import type { Store } from './store/types.js';

export interface SluiceOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** Supply a store (tests); otherwise Redis when configured, else the embedded store. */
  store?: Store;
  /** Redis key prefix (several deployments or test runs on one Redis). */
  redisKeyPrefix?: string;
  redisCommandTimeoutMs?: number;
  auth?: AuthenticatorOptions;
}

export interface Sluice {
  readonly config: Config;
  readonly store: Store;
  readonly keys: KeyService;
  readonly log: Logger;
  readonly publicServer: Server;
  readonly adminServer: Server;
  /** Starts both listeners; resolves with the ports actually bound. */
  listen(): Promise<{ port: number; adminPort: number }>;
  close(): Promise<void>;
}

export function createStore(config: Config, log: Logger, opts: Pick<SluiceOptions, 'redisKeyPrefix' | 'redisCommandTimeoutMs'> = {}): Store {
  if (config.redisUrl) {
    return new RedisStore({ url: config.redisUrl, keyPrefix: opts.redisKeyPrefix, commandTimeoutMs: opts.redisCommandTimeoutMs });
  }
  log.warn('SLUICE_REDIS_URL is not set: using the embedded in-process store. Keys and limits live in this process only; run exactly one replica.');
  return new MemoryStore();
}

export function createSluice(opts: SluiceOptions): Sluice {
  const { config } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  const store = opts.store ?? createStore(config, log, opts);
  const authenticator = new Authenticator([storeKeySource(store)], clock, opts.auth);
  const freeTier = new FreeTierLimiter(config.freeTier, store, clock);
  const ipLimiter = new IpLimiter(config.ipLimits, store, clock);
  const forwarder = new Forwarder({ upstream: config.upstream.url });
  const keys = new KeyService(store, clock, (hash) => authenticator.onChange({ type: 'deleted', hash }));

  const gateway = createGateway({
    clock,
    log,
    authenticator,
    freeTier,
    ipLimiter,
    forwarder,
    trustedProxies: config.trustedProxies.length ? trustedProxyList(config.trustedProxies) : null,
    maxBodyBytes: config.maxBodyBytes,
    upstreamCredential: config.upstream.credential,
  });
  const publicServer = http.createServer({ noDelay: true, keepAliveTimeout: 65_000, headersTimeout: 66_000 }, gateway);
  // A stream may stay silent for minutes while a model reasons: no idle cut-off on the response side.
  publicServer.timeout = 0;
  publicServer.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    log.debug({ err: err.message, code: err.code }, 'malformed request from client');
    if (socket.writable && !socket.destroyed) {
      const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    } else {
      socket.destroy();
    }
  });

  const admin = createAdminHandler({
    log,
    adminToken: config.adminToken,
    keys,
    freeTier,
    ready: () => store.ping(),
    effectiveConfig: () => publicConfig(config),
  });
  const adminServer = http.createServer(admin);

  const listenOn = (s: Server, port: number, host: string): Promise<number> =>
    new Promise((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, host, () => {
        s.off('error', reject);
        resolve((s.address() as AddressInfo).port);
      });
    });

  let closed = false;
  return {
    config,
    store,
    keys,
    log,
    publicServer,
    adminServer,
    async listen() {
      const port = await listenOn(publicServer, config.port, config.host);
      const adminPort = await listenOn(adminServer, config.adminPort, config.adminHost);
      log.info({ port, adminPort, upstream: config.upstream.url.origin, store: store.kind }, 'sluice listening');
      return { port, adminPort };
    },
    async close() {
      if (closed) return;
      closed = true;
      const stop = (s: Server): Promise<void> =>
        new Promise((resolve) => {
          if (!s.listening) return resolve();
          s.close(() => resolve());
          s.closeIdleConnections();
        });
      publicServer.closeAllConnections();
      adminServer.closeAllConnections();
      await Promise.all([stop(publicServer), stop(adminServer)]);
      forwarder.close();
      await store.close();
    },
  };
}
