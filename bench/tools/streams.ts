/**
 * Memory per open SSE stream through sluice: `npx tsx bench/tools/streams.ts [count...]`.
 * Prints sluice's RSS and V8 heap (from its /metrics) idle and with the streams open.
 * STREAMS_PLAIN=1: without the production Node flags (src/runtime/node-flags.ts); STREAMS_SETTLE_SECONDS=N:
 * also read RSS N s after the streams closed (what an idle process gives back).
 */
import { spawnRedis } from '../../test/support/redis.js';
import { compile, memoryMb, startNodeServer } from '../lib/proc.js';
import { holdStreams, timeStream } from '../lib/sse.js';

const counts = process.argv.slice(2).map(Number);
await compile();
const redis = await spawnRedis();
const relay = await startNodeServer('relay', 'relay.ts');
const up = `http://127.0.0.1:${relay.info.port as number}`;
async function heap(adminPort: number | undefined): Promise<string> {
  if (adminPort === undefined) return '';
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const get = (n: string): number => Number(new RegExp(`^${n}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 1024 / 1024;
  return `heapUsed ${get('sluice_nodejs_heap_size_used_bytes').toFixed(0)} MB heapTotal ${get('sluice_nodejs_heap_size_total_bytes').toFixed(0)} MB external ${get('sluice_nodejs_external_memory_bytes').toFixed(0)} MB`;
}
try {
  for (const n of counts.length ? counts : [1000, 5000]) {
    const bare = process.env.STREAMS_SERVER === 'bare';
    const s = await startNodeServer(bare ? 'bare' : 'sluice', bare ? 'bare.ts' : 'sluice.ts', {
      env: { BENCH_UPSTREAM: up, BENCH_REDIS_URL: redis.url, ...(process.env.STREAMS_NODE_OPTIONS ? { NODE_OPTIONS: process.env.STREAMS_NODE_OPTIONS } : {}) },
      ...(process.env.STREAMS_PLAIN === '1' ? { nodeFlags: [] } : {}),
    });
    const port = s.info.port as number;
    const admin = s.info.adminPort as number | undefined;
    await timeStream({ port, mode: 'ttfe', key: (s.info.keys as string[] | undefined)?.[0] ?? 'sk-x' });
    console.log(`idle: rss ${memoryMb(s.pid).rss.toFixed(0)} MB ${await heap(admin)}`);
    const h = await holdStreams({ port, mode: 'hold', key: (s.info.keys as string[] | undefined)?.[0] ?? 'sk-x' }, n);
    await new Promise((r) => setTimeout(r, 1500));
    if (process.env.STREAMS_SNAPSHOT) {
      // Needs STREAMS_NODE_OPTIONS='--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<dir>'.
      process.kill(s.pid, 'SIGUSR2');
      await new Promise((r) => setTimeout(r, 8000));
    }
    const rss = memoryMb(s.pid).rss;
    console.log(`${h.opened} open (${h.failed} failed, ${(h.openMs / 1000).toFixed(1)} s): rss ${rss.toFixed(0)} MB ${await heap(admin)}`);
    h.close();
    await new Promise((r) => setTimeout(r, 1000));
    console.log(`closed: rss ${memoryMb(s.pid).rss.toFixed(0)} MB ${await heap(admin)}`);
    const settle = Number(process.env.STREAMS_SETTLE_SECONDS ?? 0);
    if (settle > 0) {
      await new Promise((r) => setTimeout(r, settle * 1000));
      console.log(`${settle} s later: rss ${memoryMb(s.pid).rss.toFixed(0)} MB ${await heap(admin)}`);
    }
    await s.stop();
  }
} finally {
  await relay.stop();
  await redis.kill();
}
process.exit(0);
