/**
 * The headline: sluice as deployed against bare http-proxy, on both relay profiles, paired round by
 * round. sluice runs with its defaults (the access line at info, stdout written to a file), with
 * the free tier raised out of reach so every call is forwarded; `accessLog: off` is the variant.
 * Per profile: bare http-proxy, sluice's paid path and free path (one Redis decision per call,
 * Redis on the same cores), and both again from a second sluice with the access log off. Targets are judged on the
 * 95 % interval of the paired rounds' median (bench/lib/scenario.ts `judged`): 30 rounds put it
 * within about ±4 % here, where six rounds' medians moved by ±10 % between runs.
 */
import { RedisCounter } from '../lib/redis-stats.js';
import { FREE_BODY, PAID_BODY, expectStatus } from '../lib/requests.js';
import { pairedRounds, ratios, roundsTable, type Sample, type Variant } from '../lib/rounds.js';
import { check, info, int, judged, median, numFlag, withInterval, type Check, type Scenario } from '../lib/scenario.js';
import { RELAY_NAMES, RELAY_PROFILES, withSession, type RelayProfile } from '../lib/session.js';

/** Every call admitted: the free path forwards, as the paid path does (the schema's maximums). */
export const FREE_TIER_OUT_OF_REACH = { freeTier: { perMinute: 1_000_000, perDay: 100_000_000 } };

const KINDS = ['bare', 'paid', 'free', 'paid-log-off', 'free-log-off'] as const;
type Kind = (typeof KINDS)[number];
const LABELS: Record<Kind, string> = {
  bare: 'bare http-proxy',
  paid: 'sluice, paid (defaults)',
  free: 'sluice, free (defaults)',
  'paid-log-off': 'sluice, paid, accessLog: off',
  'free-log-off': 'sluice, free, accessLog: off',
};
const id = (p: RelayProfile, k: Kind): string => `${p}:${k}`;

export const throughput: Scenario = {
  name: 'throughput',
  summary: 'paid and free paths at the defaults against bare http-proxy, both relay profiles, access log on and off: the targets',
  headline: true,
  flags: {
    rounds: { type: 'string', help: 'rounds (default 30)' },
    seconds: { type: 'string', help: 'seconds per variant and round (default 2)' },
    connections: { type: 'string', help: 'wrk connections (default 32)' },
  },
  async run(ctx) {
    const rounds = numFlag(ctx, 'rounds', ctx.quick ? 2 : 30);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 1 : 2);
    const connections = numFlag(ctx, 'connections', 32);
    return withSession(async (s) => {
      const variants: Variant[] = [];
      for (const p of RELAY_PROFILES) {
        const relay = await s.relay(p);
        const bare = await s.server(`bare-${p}`, 'bare.ts', p);
        const logged = await s.sluice(p, { name: `sluice-${p}`, config: FREE_TIER_OUT_OF_REACH });
        const quiet = await s.sluice(p, { name: `sluice-${p}-log-off`, config: FREE_TIER_OUT_OF_REACH, env: { SLUICE_ACCESS_LOG: 'off' } });
        const v = (k: Kind, server: typeof bare, body: string): Variant => ({ id: id(p, k), server, relay, body, baseline: id(p, 'bare') });
        // The quiet process serves what the logged one serves: the access line is then the only
        // difference (a process that also runs the free path runs its paid path slower).
        variants.push(
          v('bare', bare, PAID_BODY),
          v('paid', logged, PAID_BODY),
          v('free', logged, FREE_BODY),
          v('paid-log-off', quiet, PAID_BODY),
          v('free-log-off', quiet, FREE_BODY),
        );
      }
      for (const v of variants) await expectStatus(v.server, v.body);
      const samples = await pairedRounds({ variants, rounds, seconds, warmSeconds: ctx.quick ? 1 : 2, connections, redis: s.redis, pids: () => s.pids(), log: ctx.log });
      const of = (p: RelayProfile, k: Kind): Sample[] => samples.get(id(p, k))!;
      const keyCount = variants.find((v) => v.server.keys.length)!.server.keys.length;
      const checks = targets(of, keyCount);
      const report =
        roundsTable(variants, samples, (v) => `${RELAY_NAMES[v.id.split(':')[0] as RelayProfile]}: ${LABELS[v.id.split(':')[1] as Kind]}`) +
        `\nwrk, 1 thread, ${connections} keep-alive connections, a small chat body rotating over ${keyCount} keys; ` +
        `${rounds} rounds × ${seconds} s per variant, order rotated each round; medians over rounds; "of bare": the median of per-round ratios to bare http-proxy before the same relay, with its 95 % interval. ` +
        'sluice runs `node <production flags> src/main.js` at its defaults, its stdout written to a file, the free tier raised out of reach; ' +
        'per relay one sluice process at the defaults and one with accessLog: off, each serving a paid and a free row.\n';
      return { report, checks, data: Object.fromEntries(samples) };
    });
  },
};

function targets(of: (p: RelayProfile, k: Kind) => Sample[], keyCount: number): Check[] {
  const ratio = (p: RelayProfile, k: Kind): number[] => ratios(of(p, k), of(p, 'bare'));
  const checks: Check[] = [];
  for (const p of RELAY_PROFILES) checks.push(judged(`paid path ≥ 0.90 × bare http-proxy, ${RELAY_NAMES[p]}`, ratio(p, 'paid'), (x) => x >= 0.9));
  checks.push(judged(`free path ≥ 0.80 × bare http-proxy, ${RELAY_NAMES.minimal} (Redis on the same cores)`, ratio('minimal', 'free'), (x) => x >= 0.8));
  checks.push(info(`free path of bare http-proxy, ${RELAY_NAMES.standin} (no target)`, withInterval(ratio('standin', 'free'))));
  // Per round, paid over free: a round where paid fell below free by less than the rounds' noise
  // says nothing; the paired median's interval above 1 says paid is not below.
  for (const p of RELAY_PROFILES) {
    const paidOverFree = ratios(of(p, 'paid'), of(p, 'free'));
    const below = paidOverFree.filter((x) => x < 1).length;
    const c = judged(`paid path not below the free path, ${RELAY_NAMES[p]} (paid / free, paired)`, paidOverFree, (x) => x >= 1);
    checks.push({ ...c, measured: `${c.measured}; below in ${below} of ${paidOverFree.length} rounds` });
  }
  // Paired per round: 1 − logged / off, in %.
  const lineCost = (p: RelayProfile, path: 'paid' | 'free'): number[] => ratios(of(p, path), of(p, `${path}-log-off`)).map((x) => (1 - x) * 100);
  for (const p of RELAY_PROFILES) {
    checks.push(judged(`the access line costs ≤ 3 % of paid throughput (against accessLog: off), ${RELAY_NAMES[p]}`, lineCost(p, 'paid'), (x) => x <= 3, 1, ' %'));
  }
  checks.push(info(`the access line's cost on the free path, ${RELAY_NAMES.minimal} (no target)`, `${withInterval(lineCost('minimal', 'free'), 1)} %`));
  // A cached key in use is renewed once per 45 s in the background: at most one command per key a
  // round. The store's health PING (each second, per process, off the request path) is not counted.
  const paidRounds = RELAY_PROFILES.flatMap((p) => [...of(p, 'paid'), ...of(p, 'paid-log-off')]);
  const scripts = paidRounds.reduce((a, x) => a + RedisCounter.scriptCalls(x.redis), 0);
  const mostCommands = Math.max(...paidRounds.map((x) => RedisCounter.clientCommands(x.redis) - (x.redis.ping ?? 0)));
  checks.push(
    check(
      'no Redis round trip on the paid path',
      `${scripts} limit script runs; at most ${mostCommands} commands in a round of ${int(median(paidRounds.map((x) => x.requests)))} requests (key renewals; health PINGs aside)`,
      scripts === 0 && mostCommands <= keyCount,
    ),
  );
  return checks;
}
