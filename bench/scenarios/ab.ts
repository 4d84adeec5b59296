/**
 * Before/after: two versions of sluice, each built from a git ref or a worktree's directory into
 * bench/.build/ab, started as the headline starts sluice (defaults, stdout to a file), paired round
 * by round with bare http-proxy before the same relay. For a change's own effect, which the noise
 * of separate runs would hide.
 *
 *   npm run bench -- ab --before HEAD~1                      the working tree against its last commit
 *   npm run bench -- ab --before main --after ../i28-other --path both --relay minimal
 *   npm run bench -- ab --before HEAD --after-env SLUICE_ACCESS_LOG=off     a setting's own cost
 */
import { buildSide } from '../lib/build.js';
import { FREE_BODY, PAID_BODY, expectStatus } from '../lib/requests.js';
import { pairedRounds, ratios, roundsTable, type Variant } from '../lib/rounds.js';
import { check, f, info, median, medianInterval, numFlag, strFlag, withInterval, type Check, type Scenario } from '../lib/scenario.js';
import { RELAY_NAMES, parseRelay, withSession } from '../lib/session.js';
import { FREE_TIER_OUT_OF_REACH } from './throughput.js';

export const ab: Scenario = {
  name: 'ab',
  summary: 'before/after: two builds (git refs or worktrees) paired round by round with bare http-proxy',
  flags: {
    before: { type: 'string', help: 'a git ref or a directory holding src/ (default HEAD)' },
    after: { type: 'string', help: 'a git ref or a directory holding src/ (default ., this working tree)' },
    path: { type: 'string', help: 'paid | free | both (default paid)' },
    relay: { type: 'string', help: 'standin | minimal (default standin)' },
    rounds: { type: 'string', help: 'rounds (default 60: a 95 % interval of about ±3 % here)' },
    seconds: { type: 'string', help: 'seconds per variant and round (default 2)' },
    pause: { type: 'string', help: 'seconds every server idles between rounds (default 0)' },
    'after-env': { type: 'string', multiple: true, help: 'K=V, a setting or variable for the after side only (repeatable)' },
    'after-node-flags': { type: 'string', help: 'Node flags for the after side only, space-separated' },
  },
  async run(ctx) {
    const rounds = numFlag(ctx, 'rounds', ctx.quick ? 2 : 60);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 1 : 2);
    const pauseSeconds = numFlag(ctx, 'pause', 0);
    const path = strFlag(ctx, 'path') ?? 'paid';
    if (!['paid', 'free', 'both'].includes(path)) throw new Error(`--path must be paid, free or both, not ${path}`);
    const profile = parseRelay(strFlag(ctx, 'relay'), false);
    const afterEnv: Record<string, string> = {};
    for (const kv of (ctx.flags['after-env'] as string[] | undefined) ?? []) {
      const i = kv.indexOf('=');
      if (i < 1) throw new Error(`--after-env takes K=V, not ${kv}`);
      afterEnv[kv.slice(0, i)] = kv.slice(i + 1);
    }
    const afterFlags = (strFlag(ctx, 'after-node-flags') ?? '').split(' ').filter(Boolean);
    const before = buildSide(strFlag(ctx, 'before') ?? 'HEAD', 'before');
    const after = buildSide(strFlag(ctx, 'after') ?? '.', 'after');
    ctx.log(`before: ${before.source}; after: ${after.source}`);

    return withSession(async (s) => {
      const relay = await s.relay(profile);
      const bare = await s.server('bare', 'bare.ts', profile);
      const sb = await s.sluice(profile, { name: 'sluice-before', main: before.main, config: FREE_TIER_OUT_OF_REACH });
      const sa = await s.sluice(profile, { name: 'sluice-after', main: after.main, config: FREE_TIER_OUT_OF_REACH, env: afterEnv, nodeArgs: afterFlags });
      const v = (id: string, server: typeof bare, body: string): Variant => ({ id, server, relay, body, baseline: 'bare' });
      const variants: Variant[] = [v('bare', bare, PAID_BODY)];
      if (path !== 'free') variants.push(v('before', sb, PAID_BODY), v('after', sa, PAID_BODY));
      if (path !== 'paid') variants.push(v('before-free', sb, FREE_BODY), v('after-free', sa, FREE_BODY));
      for (const x of variants) await expectStatus(x.server, x.body);
      const samples = await pairedRounds({
        variants,
        rounds,
        seconds,
        warmSeconds: ctx.quick ? 1 : 2,
        connections: 32,
        redis: s.redis,
        pids: () => s.pids(),
        pauseSeconds,
        log: ctx.log,
      });

      const checks: Check[] = [];
      const lines: string[] = [];
      for (const [b, a, what] of [
        ['before', 'after', 'paid'],
        ['before-free', 'after-free', 'free'],
      ] as const) {
        if (!samples.has(a)) continue;
        const r = ratios(samples.get(a)!, samples.get(b)!);
        const dCpu = median(samples.get(a)!.map((x, i) => x.cpuUs - samples.get(b)![i]!.cpuUs));
        // A change whose 95 % interval includes 1 is no change measured.
        const m = medianInterval(r);
        const verdict = !m ? 'too few rounds to tell (6 or more)' : m.lo > 1 ? 'faster' : m.hi < 1 ? 'slower' : 'within noise (its 95 % interval includes 1)';
        checks.push(
          info(
            `${what} path: after / before req/s, paired`,
            `${withInterval(r)}, rounds ${f(Math.min(...r))}–${f(Math.max(...r))}: ${verdict}; CPU ${dCpu >= 0 ? '+' : ''}${f(dCpu, 1)} µs/req`,
          ),
        );
        lines.push(
          `- ${what} path, of bare: before ${withInterval(ratios(samples.get(b)!, samples.get('bare')!))}, after ${withInterval(ratios(samples.get(a)!, samples.get('bare')!))}`,
        );
      }
      checks.push(
        check(
          'every answer a 200',
          `${variants.reduce((n, x) => n + samples.get(x.id)!.reduce((m, y) => m + y.failed, 0), 0)} failed`,
          variants.every((x) => samples.get(x.id)!.every((y) => y.failed === 0)),
        ),
      );
      const extras = [
        Object.keys(afterEnv).length
          ? `environment ${Object.entries(afterEnv)
              .map(([k, x]) => `${k}=${x}`)
              .join(' ')}`
          : '',
        afterFlags.length ? `Node flags ${afterFlags.join(' ')}` : '',
      ].filter(Boolean);
      const report =
        `before: ${before.source}; after: ${after.source}${extras.length ? ` with ${extras.join(', ')}` : ''}; ${RELAY_NAMES[profile]}.\n\n` +
        roundsTable(variants, samples) +
        `\n${lines.join('\n')}\n\n${rounds} rounds × ${seconds} s per variant${pauseSeconds ? `, ${pauseSeconds} s idle between rounds` : ''}; medians over rounds, ratios paired per round.\n`;
      return { report, checks, data: { before: before.source, after: after.source, afterEnv, afterFlags, samples: Object.fromEntries(samples) } };
    });
  },
};
