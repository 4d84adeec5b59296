/**
 * A flood of wrong keys: wrk (32 connections, keep-alive) posts a small chat body to one sluice
 * (Redis store) with 32 well-formed keys that no one owns, so every request is a 401 judged from
 * the key cache after the first of each key. Per round: req/s, sluice's CPU µs per request, and
 * errors (a connection the server closed counts as wrk reconnecting, not as an error).
 *   npx tsx bench/tools/wrong-keys.ts [rounds=3] [seconds=3]
 */
import { perRequest, threadSample } from '../lib/proc.js';
import { benchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 3);
const seconds = Number(process.argv[3] ?? 3);
const body = JSON.stringify({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'Say hello.' }] });
const keys = Array.from({ length: 32 }, (_, i) => 'sk-' + String(i).padStart(48, 'x'));

await benchSession(async ({ redis, start }) => {
  const sluice = await start('sluice', 'sluice.ts', { env: { BENCH_REDIS_URL: redis.url } });
  const go = (secs: number) => wrk({ url: `http://127.0.0.1:${sluice.info.port as number}/v1/chat/completions`, connections: 32, seconds: secs, body, keys });
  await go(2);
  for (let r = 0; r < rounds; r++) {
    const a = threadSample(sluice.pid);
    const res = await go(seconds);
    const p = perRequest(a, threadSample(sluice.pid), res.requests);
    console.log(`${r} ${res.rps.toFixed(0).padStart(6)} req/s  ${p.cpuUs.toFixed(1)} µs/req  non-2xx ${res.non2xx} of ${res.requests}  errors ${res.errors}`);
  }
});
process.exit(0);
