/**
 * Where a proxy's tail latency comes from at a fixed rate: event-loop delay and GC pauses inside
 * bare http-proxy and sluice (paid path, Redis store), next to the client's p50/p99, alternating:
 *   npx tsx bench/tools/pauses.ts [rate=half of bare's max] [rounds=4] [seconds=4]
 */
import type { Server } from '../lib/proc.js';
import { benchSession } from '../lib/session.js';
import { atRate } from '../lib/rate.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[3] ?? 4);
const seconds = Number(process.argv[4] ?? 4);
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
await benchSession(async ({ redis, start }) => {
  const env = { BENCH_LOOP_STATS: '1' };
  const bare = await start('bare', 'bare.ts', { env });
  const sluice = await start('sluice', 'sluice.ts', { env: { ...env, BENCH_REDIS_URL: redis.url } });
  const vs = [
    { name: 'bare', s: bare, keys: ['sk-' + 'x'.repeat(48)] },
    { name: 'sluice', s: sluice, keys: sluice.info.keys as string[] },
  ];
  const url = (s: Server): string => `http://127.0.0.1:${s.info.port as number}/v1/chat/completions`;
  for (const v of vs) await wrk({ url: url(v.s), connections: 32, seconds: 2, body, keys: v.keys });
  const rate = Number(process.argv[2] ?? 0) || Math.round((await wrk({ url: url(bare), connections: 32, seconds: 3, body, keys: vs[0]!.keys })).rps / 2);
  console.log(`rate ${rate} req/s`);
  const stats = async (s: Server): Promise<string> => {
    const before = s.tail().length;
    process.kill(s.pid, 'SIGUSR2');
    await new Promise((r) => setTimeout(r, 100));
    const line = s.tail().slice(before > 3000 ? 0 : before).trim().split('\n').filter((l) => l.includes('loopStats')).pop() ?? '{}';
    return line;
  };
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 ? [...vs].reverse() : vs) {
      await stats(v.s);
      const res = await atRate({ port: v.s.info.port as number, rate, seconds, connections: 32, body, keys: v.keys });
      console.log(`${r} ${v.name.padEnd(7)} p50 ${res.p50.toFixed(2)} p99 ${res.p99.toFixed(2)} max ${res.max.toFixed(2)} ms  ${await stats(v.s)}`);
    }
  }
});
process.exit(0);
