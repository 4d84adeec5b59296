/**
 * Throughput of the paid path under V8 flags that shrink memory, against the default and bare
 * http-proxy, alternating: `npx tsx bench/tools/node-flags.ts [rounds=4] [seconds=4]`.
 * FLAGS='{"name":["--flag",...],...}' replaces the default set (a 1 MB semi-space; the same plus
 * --optimize-for-size). Pair with `bench/tools/streams.ts` (STREAMS_NODE_OPTIONS) for what the
 * same flags save in RSS.
 */
import { spawnRedis } from '../../test/support/redis.js';
import { alternate, printAgainst, type Contender } from '../lib/alternate.js';
import { compile, startNodeServer, type Server } from '../lib/proc.js';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const flags = JSON.parse(
  process.env.FLAGS ?? '{"default":[],"semi-space 1 MB":["--max-semi-space-size=1"],"semi-space 1 MB, optimize for size":["--max-semi-space-size=1","--optimize-for-size"]}',
) as Record<string, string[]>;

await compile();
const redis = await spawnRedis();
const servers: Server[] = [];
try {
  const relay = await startNodeServer('relay', 'relay.ts');
  servers.push(relay);
  const env = { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}`, BENCH_REDIS_URL: redis.url };
  const vs: Contender[] = [];
  const add = async (id: string, script: string, nodeArgs: string[] = []): Promise<void> => {
    const server = await startNodeServer(id, script, { env, nodeArgs });
    servers.push(server);
    vs.push({ id, server });
  };
  await add('bare', 'bare.ts');
  for (const [id, args] of Object.entries(flags)) await add(id, 'sluice.ts', args);
  printAgainst(await alternate(vs, { rounds, seconds, body }), 'bare');
} finally {
  await Promise.all(servers.map((s) => s.stop()));
  await redis.kill();
}
process.exit(0);
