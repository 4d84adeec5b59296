/**
 * Before/after for hot-path work: builds a copy of bench/.build whose src/ comes from a git ref
 * (default HEAD, i.e. the working tree against the last commit), then alternates bare
 * http-proxy, sluice "before" and sluice "after" (paid path, Redis store) for N rounds.
 *   [BEFORE_REF=HEAD~2] [AB_PATH=/v1/chat/completions] [AB_MODEL=gpt-4o-mini] npx tsx bench/tools/before-after.ts [rounds] [seconds]
 */
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR, BUILD_DIR, measureWhile, type Server } from '../lib/proc.js';
import { transpileSrcAt } from '../lib/ref-src.js';
import { benchSession, type BenchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const ref = process.env.BEFORE_REF ?? 'HEAD';
const body = JSON.stringify({ model: process.env.AB_MODEL ?? 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

const oldBuild = join(BENCH_DIR, '.build-before');

/** A copy of the compiled tree whose src/ is `ref`'s, transpiled file by file. */
function buildBefore(): void {
  rmSync(oldBuild, { recursive: true, force: true });
  cpSync(BUILD_DIR, oldBuild, { recursive: true });
  rmSync(join(oldBuild, 'src'), { recursive: true, force: true });
  transpileSrcAt(ref, oldBuild);
}

await benchSession(async ({ redis, start }) => {
  buildBefore();
  try {
    await compare(redis.url, start);
  } finally {
    rmSync(oldBuild, { recursive: true, force: true });
  }
});
process.exit(0);

async function compare(redisUrl: string, start: BenchSession['start']): Promise<void> {
  const env = { BENCH_REDIS_URL: redisUrl };
  const vs: Array<{ id: string; s: Server }> = [
    { id: 'bare', s: await start('bare', 'bare.ts', { env }) },
    { id: 'sluice-before', s: await start('sluice-before', 'sluice.ts', { env, path: join(oldBuild, 'bench', 'servers', 'sluice.js') }) },
    { id: 'sluice-after', s: await start('sluice-after', 'sluice.ts', { env }) },
  ];
  const go = (v: { s: Server }, secs: number) =>
    wrk({ url: `http://127.0.0.1:${v.s.info.port as number}${process.env.AB_PATH ?? '/v1/chat/completions'}`, connections: 32, seconds: secs, body, keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'] });
  for (const v of vs) await go(v, 2);
  const acc = new Map<string, Array<{ rps: number; us: number }>>();
  for (let r = 0; r < rounds; r++) {
    const order = vs.map((_, i) => vs[(i + r) % vs.length]!);
    for (const v of order) {
      const { result, usage } = await measureWhile(v.s, () => go(v, seconds));
      const us = (usage.cpuPct / 100 / result.rps) * 1e6;
      (acc.get(v.id) ?? acc.set(v.id, []).get(v.id)!).push({ rps: result.rps, us });
      console.log(`${r} ${v.id.padEnd(14)} ${result.rps.toFixed(0).padStart(6)} req/s  ${us.toFixed(0).padStart(4)} µs/req`);
    }
  }
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const bare = acc.get('bare')!;
  for (const [id, xs] of acc) {
    const ratio = med(xs.map((x, i) => x.rps / bare[i]!.rps));
    console.log(`${id.padEnd(14)} median ${med(xs.map((x) => x.rps)).toFixed(0)} req/s, ${med(xs.map((x) => x.us)).toFixed(0)} µs/req CPU, ${ratio.toFixed(2)} of bare`);
  }
}
