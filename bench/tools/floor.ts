/**
 * What one shared decision per request costs by itself: bare http-proxy alone, with one PING to
 * Redis per request, with one free-tier decision per request (sluice's RedisStore and Lua script,
 * nothing else of sluice), and sluice's free path, alternating, N rounds.
 *   npx tsx bench/tools/floor.ts [rounds=5] [seconds=3]
 * Prints median req/s and the median of per-round ratios to bare http-proxy. The gap between bare
 * and "+ ping" is a round trip per request; between "+ ping" and "+ decision", the script's work in
 * Redis and the Lua call, less what batching saves (the decisions share socket writes, see
 * RedisStore; each PING is written on its own); between "+ decision" and sluice, everything else
 * sluice does on the free path.
 */
import { alternate, printAgainst, type Contender } from '../lib/alternate.js';
import { benchSession } from '../lib/session.js';

const rounds = Number(process.argv[2] ?? 5);
const seconds = Number(process.argv[3] ?? 3);
const body = JSON.stringify({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'Say hello.' }] });

await benchSession(async ({ redis, start }) => {
  const add = async (id: string, script: string, env: Record<string, string>): Promise<Contender> => ({ id, server: await start(id, script, { env }) });
  const vs = [
    await add('bare', 'bare.ts', {}),
    await add('bare + ping', 'bare.ts', { BENCH_DECISION_REDIS_URL: redis.url, BENCH_DECISION: 'ping' }),
    await add('bare + decision', 'bare.ts', { BENCH_DECISION_REDIS_URL: redis.url }),
    await add('sluice free', 'sluice.ts', { BENCH_REDIS_URL: redis.url }),
  ];
  // Every variant rotates over sluice's keys, so the decisions spread over its 256 users alike.
  const keys = vs[3]!.server.info.keys as string[];
  printAgainst(await alternate(vs, { rounds, seconds, body, keys, require2xx: true }), 'bare');
});
process.exit(0);
