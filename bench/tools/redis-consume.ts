/**
 * The free-tier decision alone: RedisStore.consume() in a closed loop (32 in flight), with
 * ioredis auto-pipelining on and off (sluice runs with it off: its decisions go as one script run
 * per event-loop turn, which leaves auto-pipelining nothing to merge).
 * `npx tsx bench/tools/redis-consume.ts [seconds]`. Prints decisions/s and CPU µs per decision.
 */
import { spawnRedis } from '../../test/support/redis.js';
import { RedisStore } from '../../src/store/redis.js';
import { cpuSeconds } from '../lib/proc.js';

const seconds = Number(process.argv[2] ?? 3);
const redis = await spawnRedis();
try {
  for (const round of [0, 1]) {
    for (const autoPipe of [true, false]) {
      const store = new RedisStore({ url: redis.url, keyPrefix: `bench${round}${autoPipe}:`, commandTimeoutMs: 1000, redisOptions: { enableAutoPipelining: autoPipe } });
      await store.waitReady();
      let n = 0;
      const end = performance.now() + seconds * 1000;
      const cpu0 = cpuSeconds(process.pid);
      const redisCpu0 = cpuSeconds(redis.pid);
      const t0 = performance.now();
      const worker = async (w: number): Promise<void> => {
        let i = 0;
        while (performance.now() < end) {
          const now = Date.now();
          const user = `u${(w * 131 + i++) % 256}`;
          await store.consume(
            [
              { kind: 'counter', key: `{u:${user}}:ft:d:2026-01-01`, limit: 1e8, resetAtMs: now + 86_400_000 },
              { kind: 'window', key: `{u:${user}}:ft:w`, limit: 1e6, windowMs: 60_000 },
            ],
            now,
            `${w}:${i}`,
          );
          n++;
        }
      };
      await Promise.all(Array.from({ length: 32 }, (_, w) => worker(w)));
      const secs = (performance.now() - t0) / 1000;
      const us = ((cpuSeconds(process.pid) - cpu0) / n) * 1e6;
      const rus = ((cpuSeconds(redis.pid) - redisCpu0) / n) * 1e6;
      console.log(`autoPipelining ${String(autoPipe).padEnd(5)} ${(n / secs).toFixed(0).padStart(6)} decisions/s  node ${us.toFixed(1)} µs/decision  redis ${rus.toFixed(1)} µs/decision`);
      await store.close();
    }
  }
} finally {
  await redis.kill();
}
process.exit(0);
