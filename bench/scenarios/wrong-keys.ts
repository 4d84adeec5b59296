/**
 * A flood of wrong keys: wrk posts a small chat body on 32 keep-alive connections with 32
 * well-formed keys no one owns, so every answer is a 401, judged from the key cache after the
 * first of each key. A refused client keeps its connection (a connection closed per 401 would
 * show as far fewer requests at far more CPU each).
 */
import { perRequest, threadSample } from '../lib/proc.js';
import { FREE_BODY, chatUrl, expectStatus } from '../lib/requests.js';
import { f, info, int, median, numFlag, table, type Scenario } from '../lib/scenario.js';
import { withSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';

const WRONG_KEYS = Array.from({ length: 32 }, (_, i) => 'sk-' + String(i).padStart(48, 'x'));

export const wrongKeys: Scenario = {
  name: 'wrong-keys',
  summary: 'a flood of wrong keys (401s) on keep-alive connections',
  flags: {
    rounds: { type: 'string', help: 'rounds (default 3)' },
    seconds: { type: 'string', help: 'seconds per round (default 3)' },
  },
  async run(ctx) {
    const rounds = numFlag(ctx, 'rounds', ctx.quick ? 1 : 3);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 2 : 3);
    return withSession(async (s) => {
      const sluice = await s.sluice('standin', { name: 'sluice', keys: 0 });
      await expectStatus(sluice, FREE_BODY, 401, WRONG_KEYS[0]);
      const load = (secs: number) => wrk({ url: chatUrl(sluice), connections: 32, seconds: secs, body: FREE_BODY, keys: WRONG_KEYS });
      await load(ctx.quick ? 1 : 2);
      const xs: Array<{ rps: number; cpuUs: number; refused: number; requests: number; errors: number }> = [];
      for (let r = 0; r < rounds; r++) {
        const a = threadSample(sluice.pid);
        const res = await load(seconds);
        const x = { rps: res.rps, cpuUs: perRequest(a, threadSample(sluice.pid), res.requests).cpuUs, refused: res.non2xx, requests: res.requests, errors: res.errors };
        xs.push(x);
        ctx.log(`round ${r + 1}/${rounds} ${int(x.rps)} req/s, ${f(x.cpuUs, 0)} µs/req, ${x.refused} of ${x.requests} refused, ${x.errors} socket errors`);
      }
      const rps = median(xs.map((x) => x.rps));
      const cpu = median(xs.map((x) => x.cpuUs));
      return {
        report:
          table(
            ['round', 'req/s', 'CPU µs/req', 'refused', 'socket errors'],
            xs.map((x, i) => [String(i + 1), int(x.rps), f(x.cpuUs, 0), `${x.refused} of ${x.requests}`, String(x.errors)]),
          ) + `\nwrk, 32 keep-alive connections, 32 wrong keys, a ${FREE_BODY.length}-byte body.\n`,
        checks: [info('wrong keys (401) on keep-alive connections', `${int(rps)} req/s at ${f(cpu, 0)} µs per request`)],
        data: xs,
      };
    });
  },
};
