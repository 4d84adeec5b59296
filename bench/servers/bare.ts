/**
 * Benchmark process: bare http-proxy, the forwarding library alone (no auth, no body read, no
 * limits, no log), streaming request and response through the keep-alive agent sluice's Forwarder
 * uses (src/forward/agent.ts). The baseline sluice's ratios are taken against.
 * BENCH_UPSTREAM (URL). Prints one JSON line `{"ready":true,"port":N}` on stdout.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import httpProxy from 'http-proxy';
import { createUpstreamAgent } from '../../src/forward/agent.js';
import { onStopSignal, requireEnv } from './common.js';

const upstream = new URL(requireEnv('BENCH_UPSTREAM'));
const agent = createUpstreamAgent(upstream);
const proxy = httpProxy.createProxyServer({ agent, changeOrigin: true, xfwd: false, ws: false });
proxy.on('error', (_err, _req, res) => {
  if (!(res instanceof http.ServerResponse)) return void res.destroy();
  if (!res.headersSent) {
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end('{"error":"upstream"}');
  } else {
    res.destroy();
  }
});

const target = upstream.origin;
const server = http.createServer({ noDelay: true, keepAliveTimeout: 65_000 }, (req, res) => proxy.web(req, res, { target }));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ ready: true, port, pid: process.pid }) + '\n');
});
onStopSignal(() => {
  server.closeAllConnections();
  server.close();
  agent.destroy();
});
