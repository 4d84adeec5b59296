/**
 * A sluice that idles after start-up before its first traffic (a new Pod) against one that does
 * not, with and without the Node flags production runs with (src/node-flags.ts):
 *   `npx tsx bench/tools/idle-start.ts [rounds] [seconds]`  (IDLE_SECONDS, default 20; AB_MODEL)
 *
 * Starts bare http-proxy, then sluices on the paid path (Redis store): `flags-*` with the production
 * flags, `plain-*` without. `*-busy` are warmed as soon as they are up; every other server idles
 * IDLE_SECONDS first. Then all alternate for N rounds (bench/lib/alternate.ts), printed against
 * bare. Found this way: without `--no-memory-reducer`, a sluice that idled first stayed about 10 %
 * slower for its whole life, one warmed at once did not.
 */
import { alternate, printAgainst, type Contender } from '../lib/alternate.js';
import { benchSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 6);
const seconds = Number(process.argv[3] ?? 3);
const idleSeconds = Number(process.env.IDLE_SECONDS ?? 20);
const body = JSON.stringify({ model: process.env.AB_MODEL ?? 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });

await benchSession(async ({ redis, start }) => {
  const env = { BENCH_REDIS_URL: redis.url };
  const vs: Contender[] = [{ id: 'bare', server: await start('bare', 'bare.ts', { env }) }];
  const add = async (id: string, plain: boolean, busy: boolean): Promise<void> => {
    const server = await start(id, 'sluice.ts', { env, ...(plain ? { nodeFlags: [] } : {}) });
    if (busy) {
      const url = `http://127.0.0.1:${server.info.port as number}/v1/chat/completions`;
      await wrk({ url, connections: 32, seconds: 2, body, keys: server.info.keys as string[] });
    }
    vs.push({ id, server });
  };
  await add('flags-busy', false, true);
  await add('plain-busy', true, true);
  await add('flags-idle', false, false);
  await add('plain-idle', true, false);
  await add('flags-idle-2', false, false);
  await add('plain-idle-2', true, false);
  console.log(`idling ${idleSeconds} s before the first load of the *-idle servers`);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  printAgainst(await alternate(vs, { rounds, seconds, body }), 'bare');
});
process.exit(0);
