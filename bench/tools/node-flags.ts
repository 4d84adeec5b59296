/**
 * Throughput of the paid path under V8 flags that shrink memory, against the default and bare
 * http-proxy, alternating: `npx tsx bench/tools/node-flags.ts [rounds=4] [seconds=4]`.
 * FLAGS='{"name":["--flag",...],...}' replaces the default set (a 1 MB semi-space; the same plus
 * --optimize-for-size). Pair with `bench/tools/streams.ts` (STREAMS_NODE_OPTIONS) for what the
 * same flags save in RSS. Every server also carries the production flags (src/node-flags.ts):
 * "default" means those alone.
 */
import { alternate, printAgainst, type Contender } from '../lib/alternate.js';
import { benchSession } from '../lib/session.js';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const flags = JSON.parse(
  process.env.FLAGS ?? '{"default":[],"semi-space 1 MB":["--max-semi-space-size=1"],"semi-space 1 MB, optimize for size":["--max-semi-space-size=1","--optimize-for-size"]}',
) as Record<string, string[]>;

await benchSession(async ({ redis, start }) => {
  const env = { BENCH_REDIS_URL: redis.url };
  const vs: Contender[] = [{ id: 'bare', server: await start('bare', 'bare.ts') }];
  for (const [id, nodeArgs] of Object.entries(flags)) vs.push({ id, server: await start(id, 'sluice.ts', { env, nodeArgs }) });
  printAgainst(await alternate(vs, { rounds, seconds, body }), 'bare');
});
process.exit(0);
