/**
 * The keep-alive agent toward the relay: http-proxy sends `connection: close` without one (field
 * notes, http-proxy defect 3). The benchmark's bare-proxy baseline (bench/servers/bare.ts) uses
 * this same agent, so the two differ only by what sluice adds.
 */
import http from 'node:http';
import https from 'node:https';

export interface UpstreamAgentOptions {
  /** Idle keep-alive sockets are closed after this long; keep it below the relay's own idle timeout (default 4 s). */
  keepAliveIdleMs?: number;
  /** Idle sockets kept per relay address (default 256). */
  maxFreeSockets?: number;
}

/**
 * Keep-alive with TCP keep-alive probes after 1 s, most recently used socket first (`lifo`: the
 * least risk of a socket the relay is closing for idleness), Nagle off (small requests and SSE
 * events go out at once). No bound on sockets in use: the connection cap bounds requests
 * (src/http/connections.ts), and one open stream holds one relay connection.
 */
export function createUpstreamAgent(upstream: URL, opts: UpstreamAgentOptions = {}): http.Agent {
  const agentOpts: http.AgentOptions = {
    keepAlive: true,
    keepAliveMsecs: 1000,
    timeout: opts.keepAliveIdleMs ?? 4000,
    maxFreeSockets: opts.maxFreeSockets ?? 256,
    scheduling: 'lifo',
    noDelay: true,
  };
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
