/**
 * What a free-tier decision costs: CPU time per decision of redis-server and of the sidecar's side
 * (sluice's RedisStore: building the command, reading the reply, settling the promise), for the
 * store of a git ref ("before", default HEAD) and of the working tree ("after"), alternating
 * rounds on one bench Redis. Decisions go as the free path asks for them: a day counter and a
 * one-minute window per user, 256 users, `SCRIPT_BATCH` (default 8) decisions asked in one event-loop turn (one
 * script run), one run out at a time, on a simulated clock that advances at `RATE` decisions a
 * second, so each user's window holds what it would under that load. SCRIPT_LIMIT=contract uses
 * the contract's limits (20 a minute, 100 a day: mostly refusals); the default puts them out of
 * reach, as the bench's sluice does (every call admitted, windows of RATE × 60 s / 256 entries).
 * SCRIPT_RATE (default 7000) sets that rate: at 80, each window holds about 19 calls, as one under the
 * contract's 20 a minute does.
 *   [BEFORE_REF=HEAD] [SCRIPT_LIMIT=contract] [SCRIPT_BATCH=8] [SCRIPT_RATE=7000] npx tsx bench/tools/script-cost.ts [rounds=4] [decisions per round=60000]
 */
import { cpuTimes } from '../lib/proc.js';
import { srcAt } from '../lib/ref-src.js';
import { spawnRedis } from '../../test/support/redis.js';
import { RedisStore } from '../../src/store/redis/index.js';
import type { LimitCheck } from '../../src/store/types.js';

const rounds = Number(process.argv[2] ?? 4);
const perRound = Number(process.argv[3] ?? 60_000);
const USERS = 256;
const BATCH = Number(process.env.SCRIPT_BATCH ?? 8);
const RATE = Number(process.env.SCRIPT_RATE ?? 7000);
const contract = process.env.SCRIPT_LIMIT === 'contract';
const perMinute = contract ? 20 : 1_000_000;
const perDay = contract ? 100 : 100_000_000;

type StoreClass = typeof RedisStore;
const beforeDir = srcAt(process.env.BEFORE_REF ?? 'HEAD');
const BeforeStore = ((await import(`${beforeDir}/store/redis.js`)) as { RedisStore: StoreClass }).RedisStore;

const redis = await spawnRedis();

interface Variant {
  name: string;
  store: RedisStore;
  /** Simulated clock, ms. */
  now: number;
  seq: number;
  redisUs: number[];
  clientUs: number[];
  admitted: number[];
}

async function variant(name: string, Store: StoreClass): Promise<Variant> {
  const store = new Store({ url: redis.url, keyPrefix: `cost-${name}:`, commandTimeoutMs: 5000 });
  await store.waitReady();
  return { name, store, now: Date.UTC(2026, 10, 27, 1), seq: 0, redisUs: [], clientUs: [], admitted: [] };
}

/** Asks `n` decisions, BATCH in each turn; resolves with how many were admitted. */
async function drive(v: Variant, n: number): Promise<number> {
  const dayEnd = Date.UTC(2026, 10, 27, 16);
  let admitted = 0;
  for (let sent = 0; sent < n; sent += BATCH) {
    const asked = [];
    for (let i = 0; i < BATCH; i++) {
      v.now += 1000 / RATE;
      const subject = `u:user-${(v.seq * 7919) % USERS}`;
      v.seq++;
      const checks: LimitCheck[] = [
        { kind: 'counter', subject, key: 'ft:d:2026-11-27', limit: perDay, resetAtMs: dayEnd },
        { kind: 'window', subject, key: 'ft:w', limit: perMinute, windowMs: 60_000 },
      ];
      asked.push(v.store.consume(checks, Math.floor(v.now), `m:${v.seq.toString(36)}`));
    }
    for (const d of await Promise.all(asked)) if (d.admitted) admitted++;
  }
  return admitted;
}

const variants = [await variant('before', BeforeStore), await variant('after', RedisStore)];
// Warm-up: a minute of simulated load fills every window to its steady size.
for (const v of variants) await drive(v, RATE * 60);
for (let r = 0; r < rounds; r++) {
  for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
    const a = cpuTimes(redis.pid);
    const c = process.cpuUsage();
    const ok = await drive(v, perRound);
    const cd = process.cpuUsage(c);
    const b = cpuTimes(redis.pid);
    v.redisUs.push(((b.user - a.user + b.sys - a.sys) / perRound) * 1e6);
    v.clientUs.push((cd.user + cd.system) / perRound);
    v.admitted.push(ok / perRound);
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`limits ${perMinute}/min, ${perDay}/day; ${USERS} users, ${BATCH} decisions per script run, clock at ${RATE}/s; ${rounds} rounds of ${perRound}`);
const list = (xs: number[]): string => xs.map((x) => x.toFixed(1)).join(', ');
for (const v of variants) {
  console.log(
    `${v.name.padEnd(7)} CPU per decision: Redis ${median(v.redisUs).toFixed(2)} µs (rounds ${list(v.redisUs)}), ` +
      `sidecar ${median(v.clientUs).toFixed(2)} µs (rounds ${list(v.clientUs)}); admitted ${(median(v.admitted) * 100).toFixed(0)} %`,
  );
}
for (const v of variants) await v.store.close();
await redis.kill();
process.exit(0);
