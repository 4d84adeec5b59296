/**
 * What the free-tier decision costs inside Redis, by Redis's own accounting (INFO commandstats,
 * usec_per_call of EVALSHA: the time spent running the script, without parsing the request or the
 * socket I/O), per decision: the empty script, the decision's commands added one at a time, and
 * CONSUME_LUA itself, alone and 12 decisions per run (the bench's free path sends about 8 per run
 * under load), each over about 150,000 admitted decisions in pipelines of 64 calls, one decision per simulated millisecond
 * (150 s: past the first minute every call trims the window).
 *   npx tsx bench/tools/script-cost.ts
 * Two shapes: 256 users with the bench's raised limit (sorted sets of ~234 entries, as one call
 * per 256 ms fills a minute) and 20,000 users at the contract's 20 a minute (3 entries each).
 */
import { Redis } from 'ioredis';
import { spawnRedis } from '../../test/support/redis.js';
import { CONSUME_LUA } from '../../src/store/scripts.js';

// KEYS[1] the day counter, KEYS[2] the window; ARGV[1] now, ARGV[2] member, then the checks (CONSUME_LUA
// takes a batch instead: its size, then per decision now, member, the number of checks, the checks).
// The last field: decisions per script run (the step scripts take one decision per call).
const steps: Array<[string, string, number?]> = [
  ['empty script', 'return {0,0,1,1,1,1}'],
  ['+ ZREMRANGEBYSCORE', "local now = tonumber(ARGV[1]) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000) return {0,0,1,1,1,1}"],
  ['+ ZCARD, INCR', "local now = tonumber(ARGV[1]) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000) redis.call('ZCARD', KEYS[2]) redis.call('INCR', KEYS[1]) return {0,0,1,1,1,1}"],
  ['+ ZADD', "local now = tonumber(ARGV[1]) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000) redis.call('ZCARD', KEYS[2]) redis.call('INCR', KEYS[1]) redis.call('ZADD', KEYS[2], now, ARGV[2]) return {0,0,1,1,1,1}"],
  ['+ PEXPIRE', "local now = tonumber(ARGV[1]) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000) redis.call('ZCARD', KEYS[2]) redis.call('INCR', KEYS[1]) redis.call('ZADD', KEYS[2], now, ARGV[2]) redis.call('PEXPIRE', KEYS[2], 60000) return {0,0,1,1,1,1}"],
  ['CONSUME_LUA (the decision)', CONSUME_LUA],
  ['CONSUME_LUA, 12 per run', CONSUME_LUA, 12],
];

const server = await spawnRedis();
const r = new Redis(server.url);
const consumeSha = (await r.script('LOAD', CONSUME_LUA)) as string;
try {
  // µs of script time per decision: usec_per_call divided by the decisions each call carries.
  const run = async (sha: string, users: number, perMinute: number, n: number, batch = 1): Promise<number> => {
    await r.flushall();
    await r.config('RESETSTAT');
    const t0 = Date.now();
    const dayReset = t0 + 3_600_000;
    const checks: Array<string | number> = ['c', 100_000_000, dayReset, 'w', perMinute, 60_000];
    for (let i = 0; i < n; i += 64 * batch) {
      const p = r.pipeline();
      // One call per simulated millisecond: each of the 20,000 users calls every 20 s, all admitted.
      for (let j = i; j < i + 64 * batch; j += batch) {
        if (sha === consumeSha) {
          // CONSUME_LUA takes a batch: its size, then per decision now, member, its checks.
          const keys: string[] = [];
          const args: Array<string | number> = [batch];
          for (let k = j; k < j + batch; k++) {
            keys.push(`d:${k % users}`, `w:${k % users}`);
            args.push(t0 + k, `m${k}`, 2, ...checks);
          }
          p.evalsha(sha, keys.length, ...keys, ...args);
        } else {
          p.evalsha(sha, 2, `d:${j % users}`, `w:${j % users}`, t0 + j, `m${j}`, ...checks);
        }
      }
      await p.exec();
    }
    const line = (await r.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha'))!;
    return Number(/usec_per_call=([\d.]+)/.exec(line)![1]) / batch;
  };
  console.log('µs of Redis time per decision (INFO commandstats), two passes');
  console.log(`${'script'.padEnd(30)} ${'256 users, raised limit'.padStart(24)} ${'20,000 users, 20/min'.padStart(22)}`);
  for (const [name, lua, batch] of steps) {
    const sha = (await r.script('LOAD', lua)) as string;
    const big: number[] = [];
    const small: number[] = [];
    for (let pass = 0; pass < 2; pass++) {
      big.push(await run(sha, 256, 1_000_000, 150_000, batch));
      small.push(await run(sha, 20_000, 20, 150_000, batch));
    }
    console.log(`${name.padEnd(30)} ${big.map((x) => x.toFixed(2)).join(' / ').padStart(24)} ${small.map((x) => x.toFixed(2)).join(' / ').padStart(22)}`);
  }
} finally {
  r.disconnect();
  await server.kill();
}
process.exit(0);
