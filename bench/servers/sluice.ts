/**
 * Benchmark process: a whole sluice (createSluice, as `npm start` builds it), logging silenced.
 * BENCH_UPSTREAM (URL), BENCH_REDIS_URL (absent: the embedded store), BENCH_ENGINE (optional:
 * run the Forwarder on another proxy library). The free tier is raised so far that the bench
 * never meets it (every answer must be a 200) unless BENCH_CONTRACT_LIMITS=1. Creates BENCH_KEYS (default 256) keys, one user
 * each, so that the key cache and the per-user limit state look like many clients rather than
 * one, and prints `{"ready":true,"port":N,"keys":["sk-...", ...]}` on stdout.
 */
import { createSluice } from '../../src/app.js';
import { buildConfig } from '../../src/config/index.js';
import { EventEmitter } from 'node:events';
import { createLogger, HeldDestination, logDestination } from '../../src/log/index.js';
import { setDefaultForwardEngine, type ForwardEngineName } from '../../src/forward/engine.js';
import { onStopSignal, requireEnv } from './common.js';

if (process.env.BENCH_ENGINE) setDefaultForwardEngine(process.env.BENCH_ENGINE as ForwardEngineName);

const env: Record<string, string> = {
  SLUICE_UPSTREAM_URL: requireEnv('BENCH_UPSTREAM'),
  SLUICE_PORT: '0',
  SLUICE_ADMIN_PORT: '0',
  SLUICE_HOST: '127.0.0.1',
  SLUICE_ADMIN_HOST: '127.0.0.1',
  SLUICE_LOG_LEVEL: 'silent',
  // The bench holds 5,000 streams open at once, past the default connection cap (4096).
  SLUICE_MAX_CONNECTIONS: '8192',
};
if (process.env.BENCH_REDIS_URL) env.SLUICE_REDIS_URL = process.env.BENCH_REDIS_URL;
// BENCH_ACCESS_LOG (all | errors | off): the accessLog setting, with BENCH_LOG_LEVEL=info.
if (process.env.BENCH_ACCESS_LOG) env.SLUICE_ACCESS_LOG = process.env.BENCH_ACCESS_LOG;
// The config schema caps perMinute at 1,000,000 (a minute at 16k req/s); the bench stays below.
// BENCH_CONTRACT_LIMITS=1 keeps the contract's 20 a minute and 100 a day: most calls are refused.
// BENCH_REMEMBER_REFUSALS_SECONDS sets limits.rememberRefusalsSeconds (0: every refusal asks Redis).
const limits = process.env.BENCH_REMEMBER_REFUSALS_SECONDS ? { rememberRefusalsSeconds: Number(process.env.BENCH_REMEMBER_REFUSALS_SECONDS) } : {};
// BENCH_WINDOW_SECONDS sets freeTier.windowSeconds (default 60).
const windowSeconds = Number(process.env.BENCH_WINDOW_SECONDS ?? 60);
const config = buildConfig(process.env.BENCH_CONTRACT_LIMITS === '1' ? { limits } : { freeTier: { perMinute: 1_000_000, perDay: 100_000_000, windowSeconds }, limits }, env);
// BENCH_LOG_LEVEL (e.g. info): log as a deployment does, one JSON line per request, to /dev/null
// rather than to the pipe the runner reads.
const logLevel = process.env.BENCH_LOG_LEVEL;
// BENCH_LOG_DROP: lines are formatted, then dropped: by the logger's destination itself (`1`), or
// by the sink behind sluice's gathering (`held`), to tell what each part of the line costs.
const dropMode = process.env.BENCH_LOG_DROP;
const dropSink = Object.assign(new EventEmitter(), { write: (_s: string): boolean => true, flush: (cb?: () => void): void => cb?.(), flushSync: (): void => {} });
const dest =
  dropMode === '1'
    ? (dropSink as unknown as ReturnType<typeof logDestination>)
    : dropMode === 'held'
      ? new HeldDestination(dropSink as unknown as ConstructorParameters<typeof HeldDestination>[0])
      : logDestination('/dev/null');
const sluice = createSluice({ config, ...(logLevel ? { log: createLogger(logLevel, dest) } : {}) });
const { port, adminPort } = await sluice.listen();

// The Redis store refuses commands until connected (no offline queue): retry for a while.
for (let i = 0; ; i++) {
  try {
    await sluice.keys.create({ user: `bench-${process.pid}-probe` });
    break;
  } catch (err) {
    if (i >= 100) throw err;
    await new Promise((r) => setTimeout(r, 50));
  }
}
const count = Number(process.env.BENCH_KEYS ?? 256);
const keys = await Promise.all(Array.from({ length: count }, async (_, i) => (await sluice.keys.create({ user: `bench-${process.pid}-${i}` })).key));
process.stdout.write(JSON.stringify({ ready: true, port, adminPort, keys, pid: process.pid, store: sluice.store.kind }) + '\n');
onStopSignal(() => sluice.close());
