/** Time to first SSE event: direct vs bare http-proxy vs sluice. `npx tsx bench/tools/ttfe.ts [n]` */
import { compile, startNodeServer } from '../lib/proc.js';
import { timeStream } from '../lib/sse.js';

const n = Number(process.argv[2] ?? 50);
await compile();
const relay = await startNodeServer('relay', 'relay.ts');
const up = { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}` };
const bare = await startNodeServer('bare', 'bare.ts', { env: up });
const sluice = await startNodeServer('sluice', 'sluice.ts', { env: up });
const targets = [
  ['direct', relay.info.port as number, 'sk-x'],
  ['bare', bare.info.port as number, 'sk-x'],
  ['sluice', sluice.info.port as number, (sluice.info.keys as string[])[0]!],
] as const;
const res = new Map<string, number[]>();
for (let i = 0; i < n; i++) {
  for (const [name, port, key] of targets) {
    const t = await timeStream({ port, mode: 'ttfe', key });
    (res.get(name) ?? res.set(name, []).get(name)!).push(t.firstEventMs);
  }
}
for (const [name, xs] of res) {
  xs.sort((a, b) => a - b);
  console.log(name.padEnd(7), 'p10', xs[Math.floor(n * 0.1)]!.toFixed(2), 'p50', xs[Math.floor(n / 2)]!.toFixed(2), 'p90', xs[Math.floor(n * 0.9)]!.toFixed(2));
}
await Promise.all([relay.stop(), bare.stop(), sluice.stop()]);
process.exit(0);
