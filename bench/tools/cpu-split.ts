/**
 * Where a request's CPU goes, per process: user and system time per request (all threads), and
 * how often per request each process's main thread, the one that serves, went to sleep (voluntary
 * context switches) or was preempted, for bare http-proxy, the free path's floor (bare http-proxy and one Redis decision per request)
 * and sluice (paid and free paths, Redis store, with the decisions each script run carries) and
 * for the relay behind each, from /proc/<pid>/stat and /proc/<pid>/status. Alternating
 * rounds of closed-loop wrk load (32 connections, one wrk thread). Each line also says how busy the
 * whole machine was (share of both cores, /proc/stat) and the load generator's CPU per request.
 *   [BENCH_RELAY=minimal] npx tsx bench/tools/cpu-split.ts [rounds=6] [seconds=5]
 */
import { perRequest as cpuPerRequest, selfAndChildrenSeconds, systemBusySeconds, threadSample as sample, type ThreadSample as Sample, type Server } from '../lib/proc.js';
import { RedisCounter } from '../lib/redis-stats.js';
import { benchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 6);
const seconds = Number(process.argv[3] ?? 5);
const paidBody = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const freeBody = JSON.stringify({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'Say hello.' }] });

function perRequest(a: Sample, b: Sample, n: number): string {
  return (
    `user ${(((b.user - a.user) / n) * 1e6).toFixed(1)} µs  sys ${(((b.sys - a.sys) / n) * 1e6).toFixed(1)} µs  ` +
    `sleeps ${((b.sleeps - a.sleeps) / n).toFixed(3)}  preempted ${((b.preempted - a.preempted) / n).toFixed(3)} per request`
  );
}

await benchSession(async ({ redis, start, servers }) => {
  const env = { BENCH_REDIS_URL: redis.url };
  const relay = servers[0]!;
  const sluice = await start('sluice', 'sluice.ts', { env });
  const vs: Array<{ id: string; s: Server; body: string }> = [
    { id: 'bare', s: await start('bare', 'bare.ts', { env }), body: paidBody },
    { id: 'floor', s: await start('floor', 'bare.ts', { env: { BENCH_DECISION_REDIS_URL: redis.url } }), body: freeBody },
    { id: 'paid', s: sluice, body: paidBody },
    { id: 'free', s: sluice, body: freeBody },
  ];
  const go = (v: { s: Server; body: string }, secs: number) =>
    wrk({ url: `http://127.0.0.1:${v.s.info.port as number}/v1/chat/completions`, connections: 32, seconds: secs, body: v.body, keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'] });
  const counter = new RedisCounter(redis.url);
  for (const v of vs) await go(v, 3);
  for (let r = 0; r < rounds; r++) {
    for (const v of vs.map((_, i) => vs[(i + r) % vs.length]!)) {
      const a = sample(v.s.pid);
      const ra = sample(relay.pid);
      const ca = await counter.counts();
      const rda = sample(redis.pid);
      const busyA = systemBusySeconds();
      const wrkA = selfAndChildrenSeconds();
      const t0 = performance.now();
      const res = await go(v, seconds);
      const busy = (systemBusySeconds() - busyA) / ((performance.now() - t0) / 1000) / 2;
      const wrkUs = ((selfAndChildrenSeconds() - wrkA) / Math.max(1, res.requests)) * 1e6;
      const n = Math.max(1, res.requests);
      const runs = RedisCounter.diff(ca, await counter.counts()).evalsha ?? 0;
      const redisUs = cpuPerRequest(rda, sample(redis.pid), n).cpuUs.toFixed(1);
      const batch = runs === 0 ? '' : ` | ${(n / runs).toFixed(1)} decisions per script run, Redis ${redisUs} µs per request`;
      console.log(`${r} ${v.id.padEnd(6)} ${res.rps.toFixed(0).padStart(6)} req/s | machine busy ${(busy * 100).toFixed(0)} % of 2 cores, load generator ${wrkUs.toFixed(1)} µs per request | proxy ${perRequest(a, sample(v.s.pid), n)} | relay ${perRequest(ra, sample(relay.pid), n)}${batch}`);
    }
  }
});
process.exit(0);
