/**
 * A sluice that idles after start-up before its first traffic (a new Pod) against one that does
 * not, with and without the Node flags production runs with (src/node-flags.ts):
 *   `npx tsx bench/tools/idle-start.ts [rounds] [seconds]`  (IDLE_SECONDS, default 20; AB_MODEL)
 *
 * Starts bare http-proxy, then sluices on the paid path (Redis store): `flags-*` with the production
 * flags, `plain-*` without. `*-busy` are warmed as soon as they are up; every other server idles
 * IDLE_SECONDS first. Then all alternate for N rounds. Prints each one's median req/s, server CPU µs
 * per request and its ratio to bare. Found this way: without `--no-memory-reducer`, a sluice that
 * idled first stayed about 10 % slower for its whole life, one warmed at once did not.
 */
import { measureWhile, type Server } from '../lib/proc.js';
import { benchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 6);
const seconds = Number(process.argv[3] ?? 3);
const idleSeconds = Number(process.env.IDLE_SECONDS ?? 20);
const body = JSON.stringify({ model: process.env.AB_MODEL ?? 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

await benchSession(async ({ redis, start }) => {
  const env = { BENCH_REDIS_URL: redis.url };
  const go = (s: Server, secs: number) =>
    wrk({ url: `http://127.0.0.1:${s.info.port as number}/v1/chat/completions`, connections: 32, seconds: secs, body, keys: (s.info.keys as string[] | undefined) ?? ['sk-x'] });
  const vs: Array<{ id: string; s: Server }> = [{ id: 'bare', s: await start('bare', 'bare.ts', { env }) }];
  const add = async (id: string, plain: boolean, busy: boolean): Promise<void> => {
    const s = await start(id, 'sluice.ts', { env, ...(plain ? { nodeFlags: [] } : {}) });
    if (busy) await go(s, 2);
    vs.push({ id, s });
  };
  await add('flags-busy', false, true);
  await add('plain-busy', true, true);
  await add('flags-idle', false, false);
  await add('plain-idle', true, false);
  await add('flags-idle-2', false, false);
  await add('plain-idle-2', true, false);
  console.log(`idling ${idleSeconds} s before the first load of the *-idle servers`);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  for (const v of vs) await go(v.s, 2);
  const acc = new Map<string, Array<{ rps: number; us: number }>>();
  for (let r = 0; r < rounds; r++) {
    // Rotated each round, so no server always runs right after the same one.
    for (const v of vs.map((_, i) => vs[(i + r) % vs.length]!)) {
      const { result, usage } = await measureWhile(v.s, () => go(v.s, seconds));
      (acc.get(v.id) ?? acc.set(v.id, []).get(v.id)!).push({ rps: result.rps, us: (usage.cpuPct / 100 / result.rps) * 1e6 });
    }
  }
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const bare = acc.get('bare')!;
  for (const [id, xs] of acc) {
    const ratio = med(xs.map((x, i) => x.rps / bare[i]!.rps));
    console.log(`${id.padEnd(14)} ${med(xs.map((x) => x.rps)).toFixed(0).padStart(6)} req/s  ${med(xs.map((x) => x.us)).toFixed(1).padStart(5)} µs/req  ${ratio.toFixed(3)} of bare  [${xs.map((x) => x.rps.toFixed(0)).join(' ')}]`);
  }
});
process.exit(0);
