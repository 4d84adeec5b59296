/**
 * User-space instructions per request, counted by valgrind (callgrind), for bare http-proxy and
 * sluice on each path:
 *
 *   npx tsx bench/tools/instructions.ts [seconds=30] [repeats=1]
 *
 * Unlike req/s and CPU time, an instruction count does not move with the machine's speed or with
 * what its neighbours do, so two builds (or sluice and its engine) can be compared on a noisy
 * guest. It leaves out the kernel (the system calls, which strace shows are the same in number
 * for bare and sluice: two reads and two writes per request) and what the instructions cost in
 * time (cache misses, branch misses). Each server runs under callgrind (about 50 times slower),
 * gets `seconds` of wrk load to warm up (the JIT tiers up), then its counters are zeroed and
 * another `seconds` of load is counted and divided by the requests wrk completed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnRedis } from '../../test/support/redis.js';
import { compile, startNodeServer } from '../lib/proc.js';
import { wrk } from '../lib/wrk.js';

const seconds = Number(process.argv[2] ?? 30);
const repeats = Number(process.argv[3] ?? 1);
const body = (model: string): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });

await compile();
const redis = await spawnRedis();
const relay = await startNodeServer('relay', 'relay.ts');
const upstream = `http://127.0.0.1:${relay.info.port as number}`;
const only = process.env.INSTRUCTIONS_ONLY?.split(',');
const all = [
  { name: 'bare http-proxy', script: 'bare.ts', env: {}, model: 'gpt-4o-mini' },
  { name: 'sluice, paid', script: 'sluice.ts', env: { BENCH_REDIS_URL: redis.url }, model: 'gpt-4o-mini' },
  { name: 'sluice, free (Redis)', script: 'sluice.ts', env: { BENCH_REDIS_URL: redis.url }, model: 'vend-flash-free' },
  { name: 'sluice, free (embedded)', script: 'sluice.ts', env: {}, model: 'vend-flash-free' },
  { name: 'sluice, paid, access log at info', script: 'sluice.ts', env: { BENCH_REDIS_URL: redis.url, BENCH_LOG_LEVEL: 'info' }, model: 'gpt-4o-mini' },
];
// INSTRUCTIONS_ONLY=0,1: a subset by index (the first listed is the baseline).
const variants = only ? only.map((i) => all[Number(i)]!) : all;

async function load(port: number, key: string, model: string): Promise<number> {
  const r = await wrk({ url: `http://127.0.0.1:${port}/v1/chat/completions`, connections: 8, seconds, body: body(model), keys: [key] });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} non-2xx answers`);
  return r.requests;
}

const results: Array<{ name: string; perRequest: number[]; allThreads: number[] }> = [];
try {
  for (const v of variants) {
    const perRequest: number[] = [];
    const allThreads: number[] = [];
    for (let i = 0; i < repeats; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-callgrind-'));
      const srv = await startNodeServer(v.name, v.script, {
        env: { BENCH_UPSTREAM: upstream, BENCH_KEYS: '1', ...v.env },
        wrapper: ['valgrind', '--tool=callgrind', '--smc-check=all', '--separate-threads=yes', `--callgrind-out-file=${join(dir, 'cg.out')}`],
        readyTimeoutMs: 300_000,
      });
      try {
        const key = (srv.info.keys as string[] | undefined)?.[0] ?? 'sk-' + 'x'.repeat(48);
        const port = srv.info.port as number;
        await load(port, key, v.model);
        execFileSync('callgrind_control', ['-z', String(srv.pid)], { stdio: 'ignore' });
        const requests = await load(port, key, v.model);
        execFileSync('callgrind_control', ['-d', String(srv.pid)], { stdio: 'ignore' });
        // One dump per thread: cg.out.1-01 is the main (JavaScript) thread; the others are V8's
        // compiler and GC helpers and libuv's pool, which a busy machine runs beside it.
        const dumps = readdirSync(dir).filter((f) => /^cg\.out\.\d+-\d+$/.test(f));
        const count = (f: string): number => Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, f), 'utf8'))?.[1] ?? NaN);
        const main = dumps.find((f) => f.endsWith('-01'));
        if (!main) throw new Error(`${v.name}: no callgrind dump of the main thread in ${dir}`);
        perRequest.push(count(main) / requests);
        allThreads.push(dumps.reduce((a, f) => a + count(f), 0) / requests);
      } finally {
        await srv.stop();
      }
    }
    results.push({ name: v.name, perRequest, allThreads });
    process.stderr.write(`${v.name}: main thread ${perRequest.map((n) => Math.round(n)).join(', ')}, all threads ${allThreads.map((n) => Math.round(n)).join(', ')} instructions/request\n`);
  }
} finally {
  await relay.stop();
  await redis.kill();
}
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b) / xs.length;
const base = mean(results[0]!.perRequest);
const baseAll = mean(results[0]!.allThreads);
console.log(`\n| server | main thread, thousands of instructions per request | vs bare | all threads | vs bare |\n|:---|---:|---:|---:|---:|`);
for (const r of results) {
  const k = (xs: number[]): string => xs.map((n) => (n / 1000).toFixed(1)).join(' / ');
  console.log(`| ${r.name} | ${k(r.perRequest)} | ${(mean(r.perRequest) / base).toFixed(3)} | ${k(r.allThreads)} | ${(mean(r.allThreads) / baseAll).toFixed(3)} |`);
}
console.log(`\n${seconds} s of wrk load (8 connections) counted per server after as long to warm up; \`npx tsx bench/tools/instructions.ts ${seconds} ${repeats}\`.`);
process.exit(0);
