/**
 * Refused free-tier calls: 32 users over the contract's limits (the defaults: 20 a minute, 100 a
 * day) retrying on 32 connections, against a sluice that answers their retries from memory
 * (`limits.rememberRefusalsSeconds`, default 10) and one that asks Redis each time (0).
 * The warm-up spends every user's allowance; what follows is refusals.
 */
import { measureWhile, type Server } from '../lib/proc.js';
import { RedisCounter } from '../lib/redis-stats.js';
import { FREE_BODY, chatUrl, keysOf } from '../lib/requests.js';
import { f, info, int, median, numFlag, table, type Scenario } from '../lib/scenario.js';
import { withSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

interface Round {
  rps: number;
  requests: number;
  refused: number;
  cpuUs: number;
  scripts: number;
}

export const refusals: Scenario = {
  name: 'refusals',
  summary: "users over the free tier's limits retrying: refusals answered from memory against asking Redis each time",
  flags: {
    rounds: { type: 'string', help: 'alternating rounds (default 3)' },
    seconds: { type: 'string', help: 'seconds per round (default 3)' },
  },
  async run(ctx) {
    const rounds = numFlag(ctx, 'rounds', ctx.quick ? 1 : 3);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 2 : 3);
    return withSession(async (s) => {
      const variants: Array<{ id: string; server: Server }> = [
        { id: 'refusals remembered (rememberRefusalsSeconds: 10, the default)', server: await s.sluice('standin', { name: 'sluice-remembers', keys: 32 }) },
        {
          id: 'every refusal asks Redis (rememberRefusalsSeconds: 0)',
          server: await s.sluice('standin', { name: 'sluice-asks', keys: 32, config: { limits: { rememberRefusalsSeconds: 0 } } }),
        },
      ];
      const load = (v: (typeof variants)[number], secs: number) => wrk({ url: chatUrl(v.server), connections: 32, seconds: secs, body: FREE_BODY, keys: keysOf(v.server) });
      for (const v of variants) await load(v, ctx.quick ? 1 : 2);
      const counter = new RedisCounter(s.redis.url);
      const res = new Map<string, Round[]>(variants.map((v) => [v.id, []]));
      for (let r = 0; r < rounds; r++) {
        for (const v of r % 2 ? [...variants].reverse() : variants) {
          const c0 = await counter.counts();
          const m = await measureWhile(v.server, () => load(v, seconds));
          const scripts = RedisCounter.scriptCalls(RedisCounter.diff(c0, await counter.counts()));
          const x = { rps: m.result.rps, requests: m.result.requests, refused: m.result.non2xx, cpuUs: (m.usage.cpuPct / 100 / Math.max(1, m.result.rps)) * 1e6, scripts };
          res.get(v.id)!.push(x);
          ctx.log(`round ${r + 1}/${rounds} ${v.id.slice(0, 30).padEnd(30)} ${int(x.rps)} req/s, ${x.refused} of ${x.requests} refused, ${f(x.cpuUs, 0)} µs/req`);
        }
      }
      counter.close();
      const rows = variants.map((v) => {
        const xs = res.get(v.id)!;
        const requests = xs.reduce((a, x) => a + x.requests, 0);
        const scripts = xs.reduce((a, x) => a + x.scripts, 0);
        return [
          v.id,
          int(median(xs.map((x) => x.rps))),
          `${xs.reduce((a, x) => a + x.refused, 0)} of ${requests}`,
          f(median(xs.map((x) => x.cpuUs)), 0),
          `${scripts} (${f(scripts / Math.max(1, requests), 3)}/req)`,
        ];
      });
      const m = (i: number): string => `${rows[i]![1]} req/s at ${rows[i]![3]} µs`;
      return {
        report:
          table(['sluice', 'req/s', 'refused', 'CPU µs/req', 'limit script runs'], rows) +
          `\nwrk, 32 connections, 32 users; ${rounds} alternating rounds × ${seconds} s; medians.\n`,
        checks: [info('refused calls: from memory, against asking Redis each time', `${m(0)}; ${m(1)}`)],
        data: Object.fromEntries(res),
      };
    });
  },
};
