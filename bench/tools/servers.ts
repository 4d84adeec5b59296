/**
 * Starts the relay stand-in, a bare http-proxy and a sluice (own redis-server) and prints their
 * ports, pids and keys, then waits: for poking at them by hand (strace, perf, wrk) while they run.
 * `npx tsx bench/tools/servers.ts` (Ctrl-C stops all). BENCH_TOOLS_EMBEDDED=1: sluice on the embedded store.
 */
import { spawnRedis } from '../../test/support/redis.js';
import { compile, startNodeServer } from '../lib/proc.js';

await compile();
const redis = await spawnRedis();
const relay = await startNodeServer('relay', 'relay.ts');
const up = { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}` };
const bare = await startNodeServer('bare', 'bare.ts', { env: up });
const sluice = await startNodeServer('sluice', 'sluice.ts', {
  env: { ...up, ...(process.env.BENCH_TOOLS_EMBEDDED ? {} : { BENCH_REDIS_URL: redis.url }) },
});
const keys = sluice.info.keys as string[];
console.log(JSON.stringify({
  relay: { port: relay.info.port, pid: relay.pid },
  bare: { port: bare.info.port, pid: bare.pid },
  sluice: { port: sluice.info.port, pid: sluice.pid, keys: keys.slice(0, 16).join(',') },
  redis: { url: redis.url },
}));
const stop = async (): Promise<void> => {
  await Promise.all([relay.stop(), bare.stop(), sluice.stop()]);
  await redis.kill();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
setInterval(() => {}, 1 << 30);
