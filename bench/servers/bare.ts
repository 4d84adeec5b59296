/**
 * Benchmark process: a bare proxy — the forwarding library alone, with the same keep-alive
 * agent the Forwarder uses, streaming request and response (no auth, no body read, no limits).
 * This is the engine's own limit, the baseline sluice's ratios are taken against.
 * BENCH_UPSTREAM (URL), BENCH_ENGINE (`http-proxy` | `http-proxy-3`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyEngine, createUpstreamAgent, engineTarget, type ForwardEngineName } from '../../src/forward/engine.js';
import { onStopSignal, requireEnv } from './common.js';

const upstream = new URL(requireEnv('BENCH_UPSTREAM'));
const engine = (process.env.BENCH_ENGINE ?? 'http-proxy') as ForwardEngineName;
const agent = createUpstreamAgent(upstream);
const target = engineTarget(upstream);
const proxy = createProxyEngine(engine, { agent, changeOrigin: true, xfwd: false, ws: false });
proxy.on('error', (_err, _req, res) => {
  if (!res.headersSent) {
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end('{"error":"upstream"}');
  } else {
    res.destroy();
  }
});
const server = http.createServer({ noDelay: true, keepAliveTimeout: 65_000 }, (req, res) => proxy.web(req, res, { target }));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ ready: true, port, pid: process.pid, engine }) + '\n');
});
onStopSignal(() => {
  server.closeAllConnections();
  server.close();
  agent.destroy();
});
