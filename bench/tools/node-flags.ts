/**
 * Throughput of the paid path under V8 flags that shrink memory, against the default and bare
 * http-proxy, alternating: `npx tsx bench/tools/node-flags.ts [rounds=4] [seconds=4]`.
 * FLAGS='{"name":["--flag",...],...}' replaces the default set (a 1 MB semi-space; the same plus
 * --optimize-for-size). Pair with `bench/tools/streams.ts` (STREAMS_NODE_OPTIONS) for what the
 * same flags save in RSS.
 */
import { spawnRedis } from '../../test/support/redis.js';
import { compile, measureWhile, startNodeServer, type Server } from '../lib/proc.js';
import { wrk } from '../lib/wrk.js';

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
  const vs: Array<{ id: string; s: Server }> = [];
  const add = async (id: string, script: string, nodeArgs: string[] = []): Promise<void> => {
    const s = await startNodeServer(id, script, { env, nodeArgs });
    servers.push(s);
    vs.push({ id, s });
  };
  await add('bare', 'bare.ts');
  for (const [id, args] of Object.entries(flags)) await add(id, 'sluice.ts', args);
  const go = (v: { s: Server }, secs: number) =>
    wrk({ url: `http://127.0.0.1:${v.s.info.port as number}/v1/chat/completions`, connections: 32, seconds: secs, body, keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'] });
  for (const v of vs) await go(v, 2);
  const acc = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const v of vs.map((_, i) => vs[(i + r) % vs.length]!)) {
      const { result } = await measureWhile(v.s, () => go(v, seconds));
      (acc.get(v.id) ?? acc.set(v.id, []).get(v.id)!).push(result.rps);
    }
  }
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const bare = acc.get('bare')!;
  for (const [id, xs] of acc) {
    console.log(`${id.padEnd(36)} ${med(xs).toFixed(0).padStart(6)} req/s  ${med(xs.map((x, i) => x / bare[i]!)).toFixed(2)} of bare  (rounds: ${xs.map((x) => x.toFixed(0)).join(' ')})`);
  }
} finally {
  await Promise.all(servers.map((s) => s.stop()));
  await redis.kill();
}
process.exit(0);
