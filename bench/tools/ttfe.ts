/** Time to first SSE event: direct vs raw TCP pipe vs bare http-proxy vs sluice. `npx tsx bench/tools/ttfe.ts [n]` */
import { compile, startNodeServer } from '../lib/proc.js';
import { timeStream } from '../lib/sse.js';

const n = Number(process.argv[2] ?? 50);
await compile();
const relay = await startNodeServer('relay', 'relay.ts');
const up = { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}` };
const pipe = await startNodeServer('pipe', 'pipe.ts', { env: up });
const bare = await startNodeServer('bare', 'bare.ts', { env: up });
const sluice = await startNodeServer('sluice', 'sluice.ts', { env: up });
const targets = [
  ['direct', relay.info.port as number, 'sk-x'],
  ['pipe', pipe.info.port as number, 'sk-x'],
  ['bare', bare.info.port as number, 'sk-x'],
  ['sluice', sluice.info.port as number, (sluice.info.keys as string[])[0]!],
] as const;
const res = new Map<string, number[]>();
const back = new Map<string, number[]>();
for (let i = 0; i < n; i++) {
  for (const [name, port, key] of targets) {
    const t = await timeStream({ port, mode: 'ttfe', key });
    (res.get(name) ?? res.set(name, []).get(name)!).push(t.firstEventMs);
    (back.get(name) ?? back.set(name, []).get(name)!).push(t.backMs);
  }
}
const q = (xs: number[], p: number): string => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)]!.toFixed(3);
for (const [name, xs] of res) {
  const b = back.get(name)!;
  console.log(name.padEnd(7), 'first event p10', q(xs, 0.1), 'p50', q(xs, 0.5), 'p90', q(xs, 0.9), '| relay→client p10', q(b, 0.1), 'p50', q(b, 0.5), 'p90', q(b, 0.9));
}
await Promise.all([relay.stop(), pipe.stop(), bare.stop(), sluice.stop()]);
process.exit(0);
