/**
 * Added latency at half of bare http-proxy's maximum, many short alternating rounds:
 *   npx tsx bench/tools/half.ts [rounds=10] [seconds=2]
 * BENCH_PIN=1: the proxy under test gets CPU 0 to itself (taskset), while the load client and
 * the relay share CPU 1, so the figures are the proxy's own rather than contention between it and
 * the client measuring it. Prints per-round p50/p99 and the median of the per-round differences.
 */
import { execFileSync } from 'node:child_process';
import { compile, startNodeServer, type Server } from '../lib/proc.js';
import { atRate } from '../lib/rate.js';
import { wrk } from '../lib/wrk.js';

const rounds = Number(process.argv[2] ?? 10);
const seconds = Number(process.argv[3] ?? 2);
const pin = process.env.BENCH_PIN === '1';
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] });
const setCpus = (pid: number, cpus: string): void => {
  execFileSync('taskset', ['-a', '-pc', cpus, String(pid)], { stdio: 'ignore' });
};
if (pin) setCpus(process.pid, '1');
await compile();
const relay = await startNodeServer('relay', 'relay.ts');
const up = { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}` };
const bare = await startNodeServer('bare', 'bare.ts', { env: up });
const sluice = await startNodeServer('sluice', 'sluice.ts', { env: up });
const all: Server[] = [relay, bare, sluice];
if (pin) {
  setCpus(bare.pid, '0');
  setCpus(sluice.pid, '0');
}
const v = [
  { name: 'bare', port: bare.info.port as number, keys: ['sk-' + 'x'.repeat(48)] },
  { name: 'sluice', port: sluice.info.port as number, keys: sluice.info.keys as string[] },
];
const url = (p: number): string => `http://127.0.0.1:${p}/v1/chat/completions`;
await wrk({ url: url(v[1]!.port), connections: 32, seconds: 2, body, keys: v[1]!.keys });
const max = (await wrk({ url: url(v[0]!.port), connections: 32, seconds: 3, body, keys: v[0]!.keys })).rps;
const rate = Math.round(max / 2);
console.log(`pin ${pin}: bare max ${max.toFixed(0)} req/s, rate ${rate}`);
const d50: number[] = [];
const d99: number[] = [];
for (let r = 0; r < rounds; r++) {
  const res: Record<string, { p50: number; p99: number }> = {};
  for (const x of r % 2 ? [...v].reverse() : v) res[x.name] = await atRate({ port: x.port, rate, seconds, connections: 32, body, keys: x.keys });
  d50.push(res.sluice!.p50 - res.bare!.p50);
  d99.push(res.sluice!.p99 - res.bare!.p99);
  console.log(`round ${r + 1}: bare p50 ${res.bare!.p50.toFixed(2)} p99 ${res.bare!.p99.toFixed(2)} | sluice p50 ${res.sluice!.p50.toFixed(2)} p99 ${res.sluice!.p99.toFixed(2)}`);
}
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`added p50 ${med(d50).toFixed(2)} ms, added p99 ${med(d99).toFixed(2)} ms (medians of per-round differences)`);
await Promise.all(all.map((s) => s.stop()));
process.exit(0);
