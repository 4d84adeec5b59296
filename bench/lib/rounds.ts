/**
 * Closed-loop throughput, paired: every variant runs once a round, in an order rotated each round
 * so no variant always follows the same neighbour, and ratios are taken within a round (machine
 * drift hits both sides of a pair alike). Per round and variant: wrk's figures, the CPU and
 * main-thread wake-ups per request of the server and of the relay behind it, redis-server's CPU
 * per request and the commands it ran, the log bytes written per request, and how much CPU
 * processes outside the bench took meanwhile.
 */
import type { SpawnedRedis } from '../../test/support/redis.js';
import { ForeignLoad, perRequest, threadSample, type Server } from './proc.js';
import { RedisCounter, type CommandCounts } from './redis-stats.js';
import { chatUrl, keysOf } from './requests.js';
import { f, int, median, sleep, table, withInterval } from './scenario.js';
import type { SluiceServer } from './sluice.js';
import { wrk } from './wrk.js';

export interface Variant {
  id: string;
  server: Server;
  /** The relay behind it (for a relay measured directly, the relay itself). */
  relay: Server;
  body: string;
  /** The id of the variant its ratios are taken against (bare http-proxy before the same relay). */
  baseline: string;
}

export interface Sample {
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  /** Non-2xx answers and socket errors. */
  failed: number;
  cpuUs: number;
  wakeups: number;
  relayCpuUs: number;
  relayWakeups: number;
  redisCpuUs: number;
  redis: CommandCounts;
  /** Bytes sluice wrote to its stdout per request (NaN for the others). */
  logBytes: number;
  /** CPU % (100 = one core) other processes took during the round. */
  otherLoadPct: number;
}

export interface RoundsOptions {
  variants: readonly Variant[];
  rounds: number;
  seconds: number;
  warmSeconds: number;
  connections: number;
  redis: SpawnedRedis;
  /** Every pid of the bench, for telling other load on the machine apart. */
  pids: () => number[];
  /** Idle time between rounds. */
  pauseSeconds?: number;
  log(line: string): void;
}

/** Longer than sluice holds log lines (50 ms) and than a turn's decisions take to reach Redis. */
const SETTLE_MS = 150;

const isSluice = (s: Server): s is SluiceServer => typeof (s as Partial<SluiceServer>).logBytes === 'function';

export async function pairedRounds(o: RoundsOptions): Promise<Map<string, Sample[]>> {
  const load = (v: Variant, seconds: number) => wrk({ url: chatUrl(v.server), connections: o.connections, seconds, body: v.body, keys: keysOf(v.server) });
  o.log(`warm-up: ${o.warmSeconds} s per variant`);
  for (const v of o.variants) await load(v, o.warmSeconds);
  const counter = new RedisCounter(o.redis.url);
  const foreign = new ForeignLoad(o.pids);
  const out = new Map<string, Sample[]>(o.variants.map((v) => [v.id, []]));
  try {
    for (let r = 0; r < o.rounds; r++) {
      if (r > 0 && o.pauseSeconds) await sleep(o.pauseSeconds * 1000);
      for (const v of o.variants.map((_, i) => o.variants[(i + r) % o.variants.length]!)) {
        const c0 = await counter.counts();
        const s0 = threadSample(v.server.pid);
        const r0 = threadSample(v.relay.pid);
        const d0 = threadSample(o.redis.pid);
        const log0 = isSluice(v.server) ? v.server.logBytes() : NaN;
        foreign.start();
        const res = await load(v, o.seconds);
        const otherLoadPct = foreign.stop();
        const server = perRequest(s0, threadSample(v.server.pid), res.requests);
        const relay = v.relay === v.server ? server : perRequest(r0, threadSample(v.relay.pid), res.requests);
        const redisCpuUs = perRequest(d0, threadSample(o.redis.pid), res.requests).cpuUs;
        // What the round's last requests still cause (their decisions, their held log lines) is
        // counted in this round, not in the next variant's.
        await sleep(SETTLE_MS);
        const sample: Sample = {
          rps: res.rps,
          requests: res.requests,
          p50: res.p50,
          p99: res.p99,
          failed: res.non2xx + res.errors,
          cpuUs: server.cpuUs,
          wakeups: server.wakeups,
          relayCpuUs: relay.cpuUs,
          relayWakeups: relay.wakeups,
          redisCpuUs,
          redis: RedisCounter.diff(c0, await counter.counts()),
          logBytes: isSluice(v.server) ? (v.server.logBytes() - log0) / Math.max(1, res.requests) : NaN,
          otherLoadPct,
        };
        out.get(v.id)!.push(sample);
        o.log(
          `round ${r + 1}/${o.rounds} ${v.id.padEnd(22)} ${int(res.rps).padStart(7)} req/s  p99 ${f(res.p99)} ms  ` +
            `${f(server.cpuUs, 0)} µs/req  failed ${sample.failed}  other load ${f(otherLoadPct, 0)} %`,
        );
      }
    }
  } finally {
    counter.close();
  }
  return out;
}

/** Per round, `a`'s req/s over `b`'s. */
export function ratios(a: readonly Sample[], b: readonly Sample[]): number[] {
  return a.map((s, i) => s.rps / b[i]!.rps);
}

/** The table of paired rounds: medians over rounds, ratios to each variant's baseline. */
export function roundsTable(variants: readonly Variant[], samples: Map<string, Sample[]>, label: (v: Variant) => string = (v) => v.id): string {
  const rows = variants.map((v) => {
    const xs = samples.get(v.id)!;
    const m = (k: keyof Omit<Sample, 'redis'>): number => median(xs.map((x) => x[k]));
    const scripts = xs.reduce((a, x) => a + RedisCounter.scriptCalls(x.redis), 0);
    return [
      label(v),
      int(m('rps')),
      v.baseline === v.id ? '1.00' : withInterval(ratios(xs, samples.get(v.baseline)!)),
      f(m('p99')),
      f(m('cpuUs'), 0),
      f(m('wakeups'), 3),
      f(m('relayCpuUs'), 0),
      f(m('relayWakeups'), 3),
      f(m('redisCpuUs'), 0),
      scripts ? f(xs.reduce((a, x) => a + x.requests, 0) / scripts, 1) : '–',
      Number.isNaN(m('logBytes')) ? '–' : f(m('logBytes'), 0),
      String(xs.reduce((a, x) => a + x.failed, 0)),
      f(m('otherLoadPct'), 0),
    ];
  });
  return table(
    [
      'variant',
      'req/s',
      'of bare (paired median)',
      'p99 ms',
      'CPU µs/req',
      'wake-ups/req',
      'relay µs/req',
      'relay wake-ups/req',
      'Redis µs/req',
      'decisions/script run',
      'log B/req',
      'failed',
      'other load %',
    ],
    rows,
  );
}
