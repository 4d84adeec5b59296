/**
 * What building the access line costs, in isolation: `log.info` with the access fields (how
 * sluice logged each request before) against sluice's access log (`src/access-log.ts`), both onto
 * a stream that drops what it gets, alternating, a million lines each.
 *   npx tsx bench/tools/access-line.ts [lines=1000000]
 */
import { accessFields, createAccessLog, type AccessRecord } from '../../src/access-log.js';
import { createLogger } from '../../src/log.js';

const N = Number(process.argv[2] ?? 1_000_000);
const sink = { write: (_s: string): boolean => true };
const log = createLogger('info', sink);
const access = createAccessLog(log);
const r: AccessRecord = {
  id: '20261123043510123aBcDeFgHiJkLm',
  start: performance.now(),
  method: 'POST',
  path: '/v1/chat/completions',
  family: 'openai',
  ip: '127.0.0.1',
  user: 'bench-1234-17',
  keyId: 'k_abcdefghijkl',
  model: 'gpt-4o-mini',
  freeTier: false,
  status: 200,
  decidedMs: 0.0512,
  upstreamMs: 1.2345,
};
const round = (ms: number): number => Math.round(ms * 100) / 100;
const ways: Record<string, () => void> = {
  'log.info': () => log.info(accessFields(r, 'admitted', round(performance.now() - r.start)), 'request'),
  'access log': () => access(r, 'admitted'),
};
for (let rep = 0; rep < 3; rep++) {
  for (const [name, line] of Object.entries(ways)) {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) line();
    console.log(`${name.padEnd(10)} ${(((performance.now() - t0) * 1000) / N).toFixed(2)} µs/line`);
  }
}
