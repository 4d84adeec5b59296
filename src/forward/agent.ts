/**
 * The keep-alive agent toward the relay: without one, http-proxy sets `connection: close` on every
 * request it forwards (`setupOutgoing` in its lib/http-proxy/common.js). The benchmark's bare-proxy baseline (bench/servers/bare.ts) uses
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
  return upstream.protocol === 'https:' ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
}
