/**
 * Memory with thousands of SSE streams held open (the relay sends a first event, then nothing):
 * a fresh sluice's RSS and V8 heap (from its /metrics) idle, with the streams open and after they
 * close, against a fresh bare http-proxy's RSS. sluice's connection cap is raised above the
 * count (its default is 4,096); the rest is defaults.
 */
import { memoryMb, type Server } from '../lib/proc.js';
import { RedisCounter } from '../lib/redis-stats.js';
import { DUMMY_KEY } from '../lib/requests.js';
import { check, f, numFlag, sleep, table, type Scenario } from '../lib/scenario.js';
import { withSession } from '../lib/session.js';
import { holdStreams, timeStream } from '../lib/sse.js';

const TARGET_STREAMS = 5000;

interface Held {
  opened: number;
  failed: number;
  openSeconds: number;
  idleRss: number;
  rss: number;
  closedRss: number;
  settledRss: number | null;
  heap: { idle: number; open: number; closed: number } | null;
  /** Redis commands sent while the streams were open, health PINGs aside. */
  redisCommands: number;
}

async function heapMb(adminPort: number | undefined): Promise<number> {
  if (adminPort === undefined) return NaN;
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  return Number(/^sluice_nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)/m.exec(text)?.[1] ?? NaN) / 1048576;
}

export const heldStreams: Scenario = {
  name: 'held-streams',
  summary: 'RSS with 5,000 open SSE streams, sluice against bare http-proxy',
  headline: true,
  flags: {
    count: { type: 'string', help: 'streams held open (default 5000)' },
    settle: { type: 'string', help: 'also read RSS this many seconds after the streams closed (default 0)' },
  },
  async run(ctx) {
    const count = numFlag(ctx, 'count', ctx.quick ? 1000 : TARGET_STREAMS);
    const settle = numFlag(ctx, 'settle', 0);
    return withSession(async (s) => {
      const counter = new RedisCounter(s.redis.url);
      const hold = async (server: Server, adminPort?: number): Promise<Held> => {
        const key = server.keys[0] ?? DUMMY_KEY;
        // One stream first: a fresh sluice looks its key up once, then serves it from its cache.
        await timeStream({ port: server.port, mode: 'ttfe', key });
        const idleRss = memoryMb(server.pid).rss;
        const idleHeap = await heapMb(adminPort);
        const c0 = await counter.counts();
        const held = await holdStreams({ port: server.port, mode: 'hold', key }, count);
        await sleep(1000);
        let rss = 0;
        for (let i = 0; i < 8; i++) {
          rss = Math.max(rss, memoryMb(server.pid).rss);
          await sleep(250);
        }
        const openHeap = await heapMb(adminPort);
        // The store's health PING (each second, off the request path) aside.
        const whileHeld = RedisCounter.diff(c0, await counter.counts());
        const redisCommands = RedisCounter.clientCommands(whileHeld) - (whileHeld.ping ?? 0);
        held.close();
        await sleep(1000);
        const closedRss = memoryMb(server.pid).rss;
        const closedHeap = await heapMb(adminPort);
        let settledRss: number | null = null;
        if (settle > 0) {
          await sleep(settle * 1000);
          settledRss = memoryMb(server.pid).rss;
        }
        ctx.log(`${server.name}: ${held.opened} streams open (${held.failed} failed), RSS ${f(idleRss, 0)} → ${f(rss, 0)} MB`);
        await s.stop(server);
        return {
          opened: held.opened,
          failed: held.failed,
          openSeconds: held.openMs / 1000,
          idleRss,
          rss,
          closedRss,
          settledRss,
          heap: adminPort === undefined ? null : { idle: idleHeap, open: openHeap, closed: closedHeap },
          redisCommands,
        };
      };
      const sluice = await s.sluice('standin', { name: 'sluice', env: { SLUICE_MAX_CONNECTIONS: String(Math.max(8192, count + 1000)) } });
      const hs = await hold(sluice, sluice.adminPort);
      const hb = await hold(await s.server('bare', 'bare.ts', 'standin'));
      counter.close();
      const row = (name: string, h: Held): string[] => [
        name,
        `${h.opened} (${h.failed} failed)`,
        f(h.openSeconds, 1),
        f(h.idleRss, 0),
        f(h.rss, 0),
        f(((h.rss - h.idleRss) * 1024) / Math.max(1, h.opened), 1),
        f(h.closedRss, 0),
        h.settledRss === null ? '–' : f(h.settledRss, 0),
        h.heap ? `${f(h.heap.idle, 0)} / ${f(h.heap.open, 0)} / ${f(h.heap.closed, 0)}` : '–',
      ];
      const report =
        table(
          ['process', 'streams', 'open in s', 'RSS idle MB', 'RSS open MB', 'KB per stream', 'RSS closed MB', `RSS ${settle} s later MB`, 'V8 heap used MB idle / open / closed'],
          [row('sluice (paid path, Redis store)', hs), row('bare http-proxy', hb)],
        ) + `\nRSS open is the highest of 8 samples over 2 s with every stream open; "closed" 1 s after they closed.\n`;
      const counted = count >= TARGET_STREAMS;
      return {
        report,
        checks: [
          check(
            `RSS with ${count} open SSE streams ≤ bare http-proxy + 10 %`,
            `${f(hs.rss, 0)} MB against ${f(hb.rss, 0)} MB: ${f(hs.rss / hb.rss)}×${counted ? '' : ` (the target is for ${TARGET_STREAMS})`}`,
            hs.failed > 0 || hb.failed > 0 ? false : counted ? hs.rss <= hb.rss * 1.1 : null,
          ),
          check('no Redis round trip while the streams are open', `${hs.redisCommands} commands`, hs.redisCommands === 0),
        ],
        data: { count, sluice: hs, bare: hb },
      };
    });
  },
};
