/**
 * What a quiet spell costs the traffic after it: one sluice (paid path or, PROBE_FREE=1, free path; Redis store, production
 * Node flags plus `--trace-gc`) loaded 4 s at a time with wrk, alternately after 10 s of quiet
 * (no idle collection) and after 42 s (past src/runtime/idle-gc.ts's 30 s: it may collect). Per phase:
 * req/s, sluice's CPU µs per request, scavenges per 1,000 requests and full collections seen in
 * the phase, and whether sluice collected during the quiet spell before it. PROBE_FLAGS adds Node flags (e.g. `--min-semi-space-size=16`); PROBE_NO_GC=1 drops
 * `--expose-gc`, so sluice cannot collect at all.
 *   [PROBE_CYCLES=3] [PROBE_FREE=1] [PROBE_FLAGS=...] [PROBE_NO_GC=1] npx tsx bench/tools/idle-resume.ts
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { built, perRequest, threadSample } from '../lib/proc.js';
import { benchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const extraFlags = (process.env.PROBE_FLAGS ?? '').split(' ').filter(Boolean);
const flags = NODE_FLAGS.filter((f) => !(process.env.PROBE_NO_GC === '1' && f === '--expose-gc'));
const cycles = Number(process.env.PROBE_CYCLES ?? 3);
// PROBE_FREE=1: a free model (one Redis decision per call) instead of a paid one.
const model = process.env.PROBE_FREE === '1' ? 'vend-flash-free' : 'gpt-4o-mini';
const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });

await benchSession(async ({ redis, servers }) => {
  const relay = servers[0]!;
  const child = spawn(process.execPath, [...flags, '--trace-gc', ...extraFlags, built('servers/sluice.ts')], {
    env: { ...process.env, NODE_ENV: 'production', BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}`, BENCH_REDIS_URL: redis.url },
    stdio: ['pipe', 'pipe', 'inherit'], // stdin open: a bench server stops when its stdin closes
  });
  let scavenges = 0;
  let fullGcs = 0;
  /** sluice's own collections (`gc()`: V8 reports them as "testing"). */
  let forced = 0;
  const info = await new Promise<{ port: number; keys: string[] }>((resolve) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('Scavenge')) scavenges++;
      else if (line.includes('testing')) forced++;
      else if (line.includes('Mark-Compact') || line.includes('Mark-sweep')) fullGcs++;
      else if (line.startsWith('{')) {
        const msg = JSON.parse(line) as { ready?: boolean; port: number; keys: string[] };
        if (msg.ready === true) resolve(msg);
      }
    });
  });
  try {
    let forcedBefore = 0;
    const phase = async (name: string): Promise<void> => {
      const collected = forced - forcedBefore;
      const s0 = scavenges;
      const f0 = fullGcs;
      const a = threadSample(child.pid!);
      const r = await wrk({ url: `http://127.0.0.1:${info.port}/v1/chat/completions`, connections: 32, seconds: 4, body, keys: info.keys });
      const p = perRequest(a, threadSample(child.pid!), r.requests);
      console.log(
        `${name.padEnd(22)} ${r.rps.toFixed(0).padStart(6)} req/s  ${p.cpuUs.toFixed(0).padStart(4)} µs/req  ` +
          `scavenges/1k req ${(((scavenges - s0) / Math.max(1, r.requests)) * 1000).toFixed(2)}  full GCs ${fullGcs - f0}  ` +
          `(sluice collected ${collected} time(s) while quiet)`,
      );
      forcedBefore = forced;
    };
    const quiet = (s: number): Promise<void> => new Promise((r) => setTimeout(r, s * 1000));
    await phase('warm');
    for (let i = 0; i < cycles; i++) {
      await quiet(10);
      await phase('after 10 s quiet');
      await quiet(42);
      await phase('after 42 s quiet');
    }
  } finally {
    child.kill();
  }
});
process.exit(0);
