/**
 * Before/after for hot-path work: builds a copy of bench/.build whose src/ comes from a git ref
 * (default HEAD, i.e. the working tree against the last commit), then alternates bare
 * http-proxy, sluice "before" and sluice "after" (paid path, Redis store; with AB_FREE=1 the free
 * path of each too) for N rounds, on the relay stand-in or (BENCH_RELAY=minimal) the minimal relay.
 * Per variant: req/s, its ratio to bare, CPU µs and main-thread wake-ups per request of the proxy
 * and of the relay behind it, redis-server's CPU µs per request and the decisions each limit
 * script run carried (medians over rounds).
 * AB_PAUSE_SECONDS=N idles every server N s between rounds, as the full bench's many variants do
 * (sluice collects garbage once it has been quiet for 30 s: src/runtime/idle-gc.ts).
 * AB_AFTER_FLAGS="--flag ..." starts the "after" sluice with those Node flags too, for a flag's own effect;
 * AB_AFTER_ENV="K=V ..." gives it environment of its own (e.g. BENCH_LOG_DROP=1, or BENCH_LOG_LEVEL= to unset).
 *   [BEFORE_REF=HEAD~2] [BENCH_RELAY=minimal] [AB_FREE=1] [AB_PAUSE_SECONDS=0] [AB_PATH=/v1/chat/completions] [AB_AFTER_FLAGS=...] [AB_AFTER_ENV=...] npx tsx bench/tools/before-after.ts [rounds] [seconds]
 */
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR, BUILD_DIR, perRequest, threadSample, type Server } from '../lib/proc.js';
import { transpileSrcAt } from '../lib/ref-src.js';
import { RedisCounter } from '../lib/redis-stats.js';
import { benchSession, type BenchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const ref = process.env.BEFORE_REF ?? 'HEAD';
const bodyOf = (model: string): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });
const PAID = bodyOf('gpt-4o-mini');
const FREE = bodyOf('vend-flash-free');

const oldBuild = join(BENCH_DIR, '.build-before');

/** A copy of the compiled tree whose src/ is `ref`'s, transpiled file by file. */
function buildBefore(): void {
  rmSync(oldBuild, { recursive: true, force: true });
  cpSync(BUILD_DIR, oldBuild, { recursive: true });
  rmSync(join(oldBuild, 'src'), { recursive: true, force: true });
  transpileSrcAt(ref, oldBuild);
}

await benchSession(async ({ redis, start, servers }) => {
  buildBefore();
  try {
    await compare(redis, start, servers[0]!);
  } finally {
    rmSync(oldBuild, { recursive: true, force: true });
  }
});
process.exit(0);

async function compare(redis: BenchSession['redis'], start: BenchSession['start'], relay: Server): Promise<void> {
  const env = { BENCH_REDIS_URL: redis.url };
  const counter = new RedisCounter(redis.url);
  const before = await start('sluice-before', 'sluice.ts', { env, path: join(oldBuild, 'bench', 'servers', 'sluice.js') });
  // AB_AFTER_FLAGS: Node flags the "after" sluice gets besides the production ones (same build: BEFORE_REF=HEAD).
  const afterFlags = (process.env.AB_AFTER_FLAGS ?? '').split(' ').filter(Boolean);
  // AB_AFTER_ENV="K=V ...": environment the "after" sluice gets besides the run's (an empty value unsets).
  const afterEnv = Object.fromEntries((process.env.AB_AFTER_ENV ?? '').split(' ').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1) || undefined]));
  const after = await start('sluice-after', 'sluice.ts', { env: { ...env, ...afterEnv }, nodeArgs: afterFlags });
  const vs: Array<{ id: string; s: Server; body: string }> = [
    { id: 'bare', s: await start('bare', 'bare.ts', { env }), body: PAID },
    { id: 'before', s: before, body: PAID },
    { id: 'after', s: after, body: PAID },
  ];
  if (process.env.AB_FREE === '1') vs.push({ id: 'before-free', s: before, body: FREE }, { id: 'after-free', s: after, body: FREE });
  const go = (v: { s: Server; body: string }, secs: number) =>
    wrk({
      url: `http://127.0.0.1:${v.s.info.port as number}${process.env.AB_PATH ?? '/v1/chat/completions'}`,
      connections: 32,
      seconds: secs,
      body: v.body,
      keys: (v.s.info.keys as string[] | undefined) ?? ['sk-x'],
    });
  for (const v of vs) await go(v, 2);
  interface Row {
    rps: number;
    proxy: { cpuUs: number; wakeups: number };
    relay: { cpuUs: number; wakeups: number };
    /** redis-server's CPU per request, and the decisions each limit script run carried (0: none ran). */
    redisUs: number;
    perRun: number;
  }
  const acc = new Map<string, Row[]>(vs.map((v) => [v.id, []]));
  const pauseMs = Number(process.env.AB_PAUSE_SECONDS ?? 0) * 1000;
  for (let r = 0; r < rounds; r++) {
    if (r > 0 && pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    for (const v of vs.map((_, i) => vs[(i + r) % vs.length]!)) {
      const p0 = threadSample(v.s.pid);
      const r0 = threadSample(relay.pid);
      const d0 = threadSample(redis.pid);
      const c0 = await counter.counts();
      const result = await go(v, seconds);
      const runs = RedisCounter.diff(c0, await counter.counts()).evalsha ?? 0;
      const row = {
        rps: result.rps,
        proxy: perRequest(p0, threadSample(v.s.pid), result.requests),
        relay: perRequest(r0, threadSample(relay.pid), result.requests),
        redisUs: perRequest(d0, threadSample(redis.pid), result.requests).cpuUs,
        perRun: runs === 0 ? 0 : result.requests / runs,
      };
      acc.get(v.id)!.push(row);
      console.log(
        `${r} ${v.id.padEnd(12)} ${row.rps.toFixed(0).padStart(6)} req/s | proxy ${row.proxy.cpuUs.toFixed(0).padStart(4)} µs ${row.proxy.wakeups.toFixed(3)} wake-ups | relay ${row.relay.cpuUs.toFixed(0).padStart(4)} µs ${row.relay.wakeups.toFixed(3)} wake-ups | Redis ${row.redisUs.toFixed(0).padStart(3)} µs per request`,
      );
    }
  }
  const med = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const bare = acc.get('bare')!;
  console.log('\nvariant       req/s  of bare (rounds)    proxy µs/req  proxy wake-ups/req  relay µs/req  relay wake-ups/req  Redis µs/req  decisions/script run');
  for (const [id, xs] of acc) {
    const ratios = xs.map((x, i) => x.rps / bare[i]!.rps);
    console.log(
      `${id.padEnd(12)} ${med(xs.map((x) => x.rps)).toFixed(0).padStart(6)}  ${med(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})  ` +
        `${med(xs.map((x) => x.proxy.cpuUs)).toFixed(0).padStart(12)}  ${med(xs.map((x) => x.proxy.wakeups)).toFixed(3).padStart(18)}  ` +
        `${med(xs.map((x) => x.relay.cpuUs)).toFixed(0).padStart(12)}  ${med(xs.map((x) => x.relay.wakeups)).toFixed(3).padStart(18)}  ` +
        `${med(xs.map((x) => x.redisUs)).toFixed(0).padStart(12)}  ${med(xs.map((x) => x.perRun)).toFixed(1).padStart(20)}`,
    );
  }
}
