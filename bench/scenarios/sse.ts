/**
 * Time to the first SSE event through sluice, against the relay stand-in direct, a raw TCP pipe
 * (what one more process on the way costs) and bare http-proxy. The relay holds each stream 20 ms,
 * then stamps its monotonic clock on the answer as it writes the first event; the client reads
 * its own at the first `data:` byte (one clock for every process on the machine): the event's
 * way back, free of the request's way in and the relay's timer.
 */
import { DUMMY_KEY, expectStatus, PAID_BODY } from '../lib/requests.js';
import { check, f, median, numFlag, table, type Scenario } from '../lib/scenario.js';
import { withSession } from '../lib/session.js';
import { timeStream, type StreamTiming } from '../lib/sse.js';

const PATHS = ['relay direct', 'raw TCP pipe', 'bare http-proxy', 'sluice'] as const;

export const sse: Scenario = {
  name: 'sse',
  summary: 'time to the first SSE event: direct, raw TCP pipe, bare http-proxy, sluice',
  headline: true,
  flags: { streams: { type: 'string', help: 'streams per path (default 100)' } },
  async run(ctx) {
    const n = numFlag(ctx, 'streams', ctx.quick ? 30 : 100);
    return withSession(async (s) => {
      const relay = await s.relay('standin');
      const pipe = await s.server('pipe', 'pipe.ts', 'standin');
      const bare = await s.server('bare', 'bare.ts', 'standin');
      const sluice = await s.sluice('standin', { name: 'sluice' });
      await expectStatus(sluice, PAID_BODY);
      const targets = [
        { path: PATHS[0], port: relay.port, key: DUMMY_KEY },
        { path: PATHS[1], port: pipe.port, key: DUMMY_KEY },
        { path: PATHS[2], port: bare.port, key: DUMMY_KEY },
        { path: PATHS[3], port: sluice.port, key: sluice.keys[0]! },
      ];
      ctx.log(`${n} streams per path, alternating`);
      const t = new Map<string, StreamTiming[]>(PATHS.map((p) => [p, []]));
      for (let i = 0; i < n; i++) for (const x of targets) t.get(x.path)!.push(await timeStream({ port: x.port, mode: 'ttfe', key: x.key }));
      const med = (p: string, k: 'firstEventMs' | 'backMs' | 'totalMs'): number => median(t.get(p)!.map((x) => x[k]));
      const p90 = (p: string, k: 'firstEventMs' | 'backMs'): number => {
        const xs = t
          .get(p)!
          .map((x) => x[k])
          .sort((a, b) => a - b);
        return xs[Math.min(xs.length - 1, Math.ceil(0.9 * xs.length) - 1)]!;
      };
      const failed = (p: string): number => t.get(p)!.filter((x) => x.status !== 200 || !Number.isFinite(x.firstEventMs) || !Number.isFinite(x.backMs)).length;
      const rows = PATHS.map((p) => [
        p,
        f(med(p, 'backMs')),
        f(p90(p, 'backMs')),
        p === PATHS[0] ? '' : f(med(p, 'backMs') - med(PATHS[0], 'backMs')),
        f(med(p, 'firstEventMs')),
        f(med(p, 'totalMs')),
        String(median(t.get(p)!.map((x) => x.events))),
        String(failed(p)),
      ]);
      const added = med('sluice', 'backMs') - med('relay direct', 'backMs');
      const report =
        table(['path', 'relay → client p50 ms', 'p90 ms', 'added p50 ms', 'request → first event p50 ms', 'whole stream p50 ms', 'events', 'failed'], rows) +
        `\n${n} streams per path, each on a fresh connection, paths alternating. "Relay → client" is the event's way back; ` +
        '"request → first event" adds the request\'s way in and the relay\'s 20 ms.\n';
      return {
        report,
        checks: [
          check(
            "SSE first event within 1 ms of the relay's (its way back, median)",
            `+${f(added)} ms (bare http-proxy +${f(med('bare http-proxy', 'backMs') - med('relay direct', 'backMs'))}, raw TCP pipe +${f(med('raw TCP pipe', 'backMs') - med('relay direct', 'backMs'))})`,
            added <= 1 && failed('sluice') === 0,
          ),
        ],
        data: Object.fromEntries(t),
      };
    });
  },
};
