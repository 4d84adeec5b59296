/**
 * Benchmark process: a bare proxy — the forwarding library alone, with the same keep-alive
 * agent the Forwarder uses, streaming request and response (no auth, no body read, no limits).
 * This is the engine's own limit, the baseline sluice's ratios are taken against.
 * BENCH_UPSTREAM (URL), BENCH_ENGINE (`http-proxy` | `http-proxy-3`).
 *
 * BENCH_DECISION_REDIS_URL: before forwarding, one free-tier decision per request through
 * sluice's own RedisStore (the same Lua script, keys and write batching as the free path), the user
 * taken from the Authorization header as it is, unchecked. Nothing else of sluice runs: this is the
 * floor for any proxy that makes an exact shared decision per request on this engine and this
 * Redis, so the free path can be judged against it as well as against the bare engine.
 * BENCH_DECISION=ping sends a PING instead (one write per request, no script): the round trip alone.
 * BENCH_WINDOW_SECONDS (default 60): the decision's window, as the bench's sluice takes it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyEngine, createUpstreamAgent, engineTarget, type ForwardEngineName } from '../../src/forward/engine.js';
import { nextMember } from '../../src/limits/member.js';
import { RedisStore } from '../../src/store/redis/index.js';
import type { LimitCheck } from '../../src/store/types.js';
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

const decisionUrl = process.env.BENCH_DECISION_REDIS_URL;
const pingOnly = process.env.BENCH_DECISION === 'ping';
const store = decisionUrl ? new RedisStore({ url: decisionUrl, keyPrefix: `bench-bare-${process.pid}:`, commandTimeoutMs: 1000 }) : null;
if (store) await store.waitReady();
// The bench's sluice raises the free tier out of reach (every call admitted); so does this.
const dayEndsAt = Date.now() + 24 * 3_600_000;
const checksFor = (user: string): LimitCheck[] => [
  { kind: 'counter', key: `{u:${user}}:ft:d:bench`, limit: 100_000_000, resetAtMs: dayEndsAt },
  { kind: 'window', key: `{u:${user}}:ft:w`, limit: 1_000_000, windowMs: Number(process.env.BENCH_WINDOW_SECONDS ?? 60) * 1000 },
];

const forward = (req: http.IncomingMessage, res: http.ServerResponse): void => proxy.web(req, res, { target });
const handler = store
  ? (req: http.IncomingMessage, res: http.ServerResponse): void => {
      const user = (req.headers.authorization ?? '').slice(-16);
      const decided: Promise<{ admitted: boolean }> = pingOnly ? store.client.ping().then(() => ({ admitted: true })) : store.consume(checksFor(user), Date.now(), nextMember());
      decided.then(
        (d) => {
          if (d.admitted) forward(req, res);
          else res.writeHead(429).end();
        },
        () => res.writeHead(503).end(),
      );
    }
  : forward;

const server = http.createServer({ noDelay: true, keepAliveTimeout: 65_000 }, handler);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ ready: true, port, pid: process.pid, engine, decision: store !== null }) + '\n');
});
onStopSignal(async () => {
  server.closeAllConnections();
  server.close();
  agent.destroy();
  await store?.close();
});
