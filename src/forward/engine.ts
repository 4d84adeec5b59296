/**
 * The proxy library under the Forwarder, chosen in one place so it stays swappable.
 *
 * http-proxy 1.18.1 and http-proxy-3 share an API (`createProxyServer`, `web`, the
 * `proxyReq`/`proxyRes`/`error` events). The benchmark measures both (bare and inside sluice)
 * and the default below is the one that measured better; see docs/performance.md.
 * http-proxy-3 is loaded lazily: it is a dev dependency, absent from a production image.
 */
import http from 'node:http';
import https from 'node:https';
import { createRequire } from 'node:module';
import httpProxy from 'http-proxy';

export type ForwardEngineName = 'http-proxy' | 'http-proxy-3';

/** What the measurements chose (docs/performance.md). */
export const DEFAULT_FORWARD_ENGINE: ForwardEngineName = 'http-proxy';

let defaultEngine: ForwardEngineName = DEFAULT_FORWARD_ENGINE;

/**
 * For benchmarks and diagnostics only: the engine of Forwarders created afterwards without an
 * explicit `engine` (the benchmark runs a whole sluice on each engine this way).
 */
export function setDefaultForwardEngine(name: ForwardEngineName): void {
  defaultEngine = name;
}

export function defaultForwardEngine(): ForwardEngineName {
  return defaultEngine;
}

/** The part of the (shared) http-proxy API the Forwarder uses. */
export interface ProxyEngine {
  web(req: http.IncomingMessage, res: http.ServerResponse, options: Record<string, unknown>): void;
  on(event: 'proxyReq', listener: (proxyReq: http.ClientRequest, req: http.IncomingMessage) => void): unknown;
  on(event: 'proxyRes', listener: (proxyRes: http.IncomingMessage, req: http.IncomingMessage, res: http.ServerResponse) => void): unknown;
  on(event: 'error', listener: (err: Error, req: http.IncomingMessage, res: http.ServerResponse) => void): unknown;
  close(): void;
}

export interface UpstreamAgentOptions {
  /** Idle keep-alive sockets are closed after this long; keep it below the relay's own idle timeout. */
  keepAliveIdleMs?: number;
  maxFreeSockets?: number;
}

/**
 * The keep-alive agent toward the relay (http-proxy sends `connection: close` without one).
 * Exported so that the benchmark's bare-proxy baseline uses exactly the same agent.
 */
export function createUpstreamAgent(upstream: URL, opts: UpstreamAgentOptions = {}): http.Agent {
  const agentOpts: http.AgentOptions = {
    keepAlive: true,
    keepAliveMsecs: 1000,
    timeout: opts.keepAliveIdleMs ?? 4000,
    maxFreeSockets: opts.maxFreeSockets ?? 256,
    scheduling: 'lifo',
    noDelay: true,
  } as http.AgentOptions;
  return connectionOptionsOnly(upstream.protocol === 'https:' ? new https.Agent(agentOpts) : new http.Agent(agentOpts));
}

/** Node's Agent method that opens a socket (not in @types/node). */
interface SocketOpener {
  createSocket(req: http.ClientRequest, options: Record<string, unknown>, cb: (...args: unknown[]) => void): void;
}

/** Request fields that say nothing about the connection. */
const NOT_CONNECTION = new Set(['headers', 'method', 'agent', 'auth']);

/**
 * Node's Agent keeps the options it opened a socket with for that socket's whole life (its
 * listeners close over them). Under http-proxy those are a 20-field dictionary, most fields
 * undefined TLS settings, and the first request's headers, its Authorization included: kept per
 * relay connection, and there is one connection per open stream. Only the fields that name and open
 * the connection are passed on. The Agent adds its own options after these, as before.
 */
function connectionOptionsOnly<A extends http.Agent>(agent: A): A {
  const opener = agent as A & SocketOpener;
  const createSocket = opener.createSocket;
  if (typeof createSocket !== 'function') return agent;
  opener.createSocket = function (req, options, cb) {
    const kept: Record<string, unknown> = {};
    for (const k in options) if (options[k] !== undefined && !NOT_CONNECTION.has(k)) kept[k] = options[k];
    createSocket.call(this, req, kept, cb);
  };
  return agent;
}

/**
 * The target object each library expects: http-proxy 1.18.1 joins `path` with the request
 * path, http-proxy-3 reads `pathname` (a URL's shape). Both collapse repeated slashes.
 */
export function engineTarget(upstream: URL): Record<string, string> {
  const secure = upstream.protocol === 'https:';
  const path = upstream.pathname === '/' ? '' : upstream.pathname.replace(/\/$/, '');
  return {
    protocol: upstream.protocol,
    host: upstream.hostname,
    port: upstream.port || (secure ? '443' : '80'),
    path,
    pathname: path === '' ? '/' : path,
  };
}

export function createProxyEngine(name: ForwardEngineName, options: Record<string, unknown>): ProxyEngine {
  if (name === 'http-proxy') return httpProxy.createProxyServer(options) as unknown as ProxyEngine;
  const require = createRequire(import.meta.url);
  const mod = require('http-proxy-3') as { createProxyServer(o: Record<string, unknown>): ProxyEngine };
  return mod.createProxyServer(options);
}
