/**
 * What the request path's metric calls cost: `npx tsx bench/metrics-path.ts [calls]`.
 *
 * Every request ends in one countRequest and one observeDecision; a relayed one adds an
 * observeRelay. This times `calls` (1e6) requests of each kind over rotating families and
 * outcomes, after a warm-up, in five rounds, and prints the median and the best per request. A
 * micro-benchmark: it says what the calls cost in a hot loop, not among a request's other work.
 */
import { Metrics } from '../src/metrics/index.js';
import type { Outcome } from '../src/answers/outcome.js';
import type { RouteFamily } from '../src/routing/routes.js';

const calls = Number(process.argv[2] ?? 1e6);
const families: RouteFamily[] = ['chat', 'messages', 'gemini', 'responses'];
const outcomes: Outcome[] = ['admitted', 'admitted', 'admitted', 'unauthorized', 'free_tier_minute'];

const m = new Metrics({ processMetrics: false });

const kinds: Record<string, (i: number) => void> = {
  'refused (countRequest + observeDecision)': (i) => {
    const family = families[i & 3]!;
    m.countRequest(family, outcomes[i % 5]!);
    m.observeDecision(family, 0.0003 + (i & 7) * 0.0001);
  },
  'relayed (countRequest + observeDecision + observeRelay)': (i) => {
    const family = families[i & 3]!;
    m.countRequest(family, outcomes[i % 5]!);
    m.observeDecision(family, 0.0003 + (i & 7) * 0.0001);
    m.observeRelay(family, 0.02 + (i & 15) * 0.01);
  },
};

for (const [name, request] of Object.entries(kinds)) {
  const round = (n: number): number => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) request(i);
    return Number(process.hrtime.bigint() - start) / n;
  };
  round(200_000); // warm-up: the optimising compiler settles
  const ns: number[] = [];
  for (let r = 0; r < 5; r++) ns.push(round(calls));
  ns.sort((a, b) => a - b);
  console.log(`${name}, ${calls} × 5 rounds: median ${ns[2]!.toFixed(0)} ns, best ${ns[0]!.toFixed(0)} ns per request`);
}
if (!(await m.registry.metrics()).includes('sluice_requests_total{family="chat",outcome="admitted"}')) throw new Error('nothing was counted');
