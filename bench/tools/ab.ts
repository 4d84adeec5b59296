/**
 * Quick A/B for engine work: bare http-proxy vs sluice (paid, Redis; sluice-log: with the access
 * log at info, to /dev/null) vs sluice on the embedded
 * store, alternating, N rounds. `npx tsx bench/tools/ab.ts [rounds] [seconds]`.
 * Prints req/s, p99 and server CPU µs per request for each round. AB_RATE=N drives each at N req/s
 * (open loop) instead of wrk's maximum.
 */
import { ForeignLoad, measureWhile, type Server } from '../lib/proc.js';
import { benchSession } from '../lib/session.js';
import { atRate } from '../lib/rate.js';
import { wrk, type LoadResult } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 4);
const only = process.env.AB_ONLY?.split(',');
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

await benchSession(async ({ redis, servers, start }) => {
  const defs: Array<[string, string, Record<string, string>]> = [
    ['bare', 'bare.ts', {}],
    ['sluice', 'sluice.ts', { BENCH_REDIS_URL: redis.url }],
    ['sluice-mem', 'sluice.ts', {}],
    ['sluice-1key', 'sluice.ts', { BENCH_REDIS_URL: redis.url, BENCH_KEYS: '1' }],
    ['sluice-log', 'sluice.ts', { BENCH_REDIS_URL: redis.url, BENCH_LOG_LEVEL: 'info' }],
    ['sluice-log-errors', 'sluice.ts', { BENCH_REDIS_URL: redis.url, BENCH_LOG_LEVEL: 'info', BENCH_ACCESS_LOG: 'errors' }],
  ];
  const vs: Array<{ id: string; s: Server }> = [];
  for (const [id, script, env] of defs) {
    if (only && !only.includes(id)) continue;
    vs.push({ id, s: await start(id, script, { env }) });
  }
  const foreign = new ForeignLoad(() => [...servers.flatMap((s) => s.pids()), redis.pid]);
  // AB_RATE=N: a fixed rate (open loop) instead of wrk's closed loop, so every variant does the
  // same work per second and CPU per request is not inflated by a saturated machine's scheduling.
  const rate = Number(process.env.AB_RATE ?? 0);
  const run = (v: { s: Server }, secs: number) =>
    rate
      ? atRate({ port: v.s.info.port as number, rate, seconds: secs, connections: 32, body, keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'] }).then((r): LoadResult => ({ ...r, requests: r.completed, seconds: secs }))
      : wrk({ url: `http://127.0.0.1:${v.s.info.port as number}/v1/chat/completions`, connections: 32, seconds: secs, body, keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'] });
  for (const v of vs) await run(v, 2);
  const acc = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 ? [...vs].reverse() : vs) {
      foreign.start();
      const { result, usage } = await measureWhile(v.s, () => run(v, seconds));
      const other = foreign.stop();
      const us = (usage.cpuPct / 100 / result.rps) * 1e6;
      (acc.get(v.id) ?? acc.set(v.id, []).get(v.id)!).push(result.rps);
      console.log(`${r} ${v.id.padEnd(11)} ${result.rps.toFixed(0).padStart(6)} req/s p99 ${result.p99.toFixed(2).padStart(6)} cpu ${usage.cpuPct.toFixed(0).padStart(3)}% ${us.toFixed(0).padStart(4)} µs/req other ${other.toFixed(0)}% non2xx ${result.non2xx}`);
    }
  }
  for (const [id, xs] of acc) console.log(id, 'median', [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0));
});
process.exit(0);
