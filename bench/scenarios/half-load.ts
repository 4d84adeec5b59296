/**
 * Latency sluice adds at half of bare http-proxy's maximum, open loop (bench/lib/rate-client.ts:
 * requests due at a fixed rate, latency counted from when each was due). Bare http-proxy and the
 * paid path alternate round by round; the free path runs its rounds afterwards at the same rate,
 * for information (near its own maximum it queues, and interleaved it would disturb the pairs).
 */
import { atRate, type RateResult } from '../lib/rate.js';
import { FREE_BODY, PAID_BODY, chatUrl, expectStatus, keysOf } from '../lib/requests.js';
import { check, f, info, int, median, numFlag, strFlag, table, type Check, type Scenario } from '../lib/scenario.js';
import { RELAY_NAMES, parseRelay, withSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';
import { FREE_TIER_OUT_OF_REACH } from './throughput.js';

const CONNECTIONS = 32;

export const halfLoad: Scenario = {
  name: 'half-load',
  summary: "added p50/p99 at half of bare http-proxy's maximum (open loop), paid path, both relay profiles",
  headline: true,
  flags: {
    rounds: { type: 'string', help: 'alternating rounds (default 8)' },
    seconds: { type: 'string', help: 'seconds per round (default 2)' },
    relay: { type: 'string', help: 'standin | minimal | both (default both)' },
  },
  async run(ctx) {
    const rounds = numFlag(ctx, 'rounds', ctx.quick ? 1 : 8);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 2 : 2);
    const profiles = parseRelay(strFlag(ctx, 'relay'), true);
    return withSession(async (s) => {
      const checks: Check[] = [];
      const sections: string[] = [];
      const data: Record<string, unknown> = {};
      for (const p of profiles) {
        const bare = await s.server(`bare-${p}`, 'bare.ts', p);
        const sluice = await s.sluice(p, { name: `sluice-${p}`, config: FREE_TIER_OUT_OF_REACH });
        const variants = [
          { id: 'bare http-proxy', server: bare, body: PAID_BODY },
          { id: 'sluice, paid', server: sluice, body: PAID_BODY },
          { id: 'sluice, free', server: sluice, body: FREE_BODY },
        ];
        for (const v of variants) await expectStatus(v.server, v.body);
        for (const v of variants) await wrk({ url: chatUrl(v.server), connections: CONNECTIONS, seconds: ctx.quick ? 1 : 2, body: v.body, keys: keysOf(v.server) });
        const bareMax = (await wrk({ url: chatUrl(bare), connections: CONNECTIONS, seconds: ctx.quick ? 2 : 3, body: PAID_BODY, keys: keysOf(bare) })).rps;
        const rate = Math.round(bareMax / 2);
        ctx.log(`${RELAY_NAMES[p]}: bare http-proxy's maximum ${int(bareMax)} req/s, half ${int(rate)}`);
        const res = new Map<string, RateResult[]>(variants.map((v) => [v.id, []]));
        const one = async (v: (typeof variants)[number], r: number): Promise<void> => {
          const x = await atRate({ port: v.server.port, rate, seconds, connections: CONNECTIONS, body: v.body, keys: keysOf(v.server) });
          res.get(v.id)!.push(x);
          ctx.log(`${p} round ${r + 1}/${rounds} ${v.id.padEnd(16)} p50 ${f(x.p50)}  p99 ${f(x.p99)}  p99.9 ${f(x.p999)} ms`);
        };
        const pair = variants.slice(0, 2);
        for (let r = 0; r < rounds; r++) for (const v of r % 2 ? [...pair].reverse() : pair) await one(v, r);
        for (let r = 0; r < rounds; r++) await one(variants[2]!, r);

        const bareRounds = res.get('bare http-proxy')!;
        const added = (id: string, k: 'p50' | 'p99'): number => median(res.get(id)!.map((x, i) => x[k] - bareRounds[i]![k]));
        const rows = variants.map((v) => {
          const xs = res.get(v.id)!;
          const p99s = xs.map((x) => x.p99);
          return [
            v.id,
            int(median(xs.map((x) => x.rps))),
            f(median(xs.map((x) => x.p50))),
            f(median(p99s)),
            `${f(Math.min(...p99s), 1)}–${f(Math.max(...p99s), 1)}`,
            f(median(xs.map((x) => x.p999))),
            v === variants[0] ? '' : f(added(v.id, 'p50')),
            v === variants[0] ? '' : f(added(v.id, 'p99')),
            String(xs.reduce((a, x) => a + x.non2xx + x.errors, 0)),
          ];
        });
        sections.push(
          `### ${RELAY_NAMES[p]}, ${int(rate)} req/s\n\n` +
            table(['variant', 'req/s', 'p50 ms', 'p99 ms', 'p99 range ms', 'p99.9 ms', 'added p50 ms', 'added p99 ms', 'failed'], rows),
        );
        // On a shared 2-core machine the tail moves by more than the 1 ms budget from round to round:
        // a difference within bare's own round-to-round spread, or from too few rounds to see it, is no verdict.
        const addedP99 = added('sluice, paid', 'p99');
        const spread = Math.max(...bareRounds.map((x) => x.p99)) - Math.min(...bareRounds.map((x) => x.p99));
        const noisy = rounds < 3 || (addedP99 <= 1 ? spread > 5 : addedP99 <= spread);
        checks.push(
          check(
            `added p99 ≤ 1 ms at half of bare http-proxy's maximum, paid path, ${RELAY_NAMES[p]}`,
            `${f(addedP99)} ms (median of per-round differences; bare's own p99 spread ${f(spread, 1)} ms)`,
            noisy ? null : addedP99 <= 1,
          ),
        );
        checks.push(info(`added p99 at the same rate, free path, ${RELAY_NAMES[p]}`, `${f(added('sluice, free', 'p99'))} ms`));
        data[p] = { bareMax, rate, rounds: Object.fromEntries(res) };
        await s.stop(bare);
        await s.stop(sluice);
      }
      const report =
        sections.join('\n') +
        `\nOpen-loop client, ${CONNECTIONS} connections, ${rounds} rounds × ${seconds} s; bare http-proxy and the paid path alternate, the free path follows; ` +
        '"added" is the median of per-round differences to bare http-proxy (the free path against bare\'s rounds in order).\n';
      return { report, checks, data };
    });
  },
};
