/**
 * A CPU profile under load: sluice at its defaults (or bare http-proxy) under `node --cpu-prof`,
 * wrk for a warm-up and then the measured seconds, stopped so the profile is written. Reports the
 * top self-time frames and the self time per module; the raw .cpuprofile (for Chrome DevTools)
 * is kept under bench/.results.
 */
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ROOT_DIR } from '../lib/build.js';
import type { Server } from '../lib/proc.js';
import { FREE_BODY, PAID_BODY, chatUrl, expectStatus, keysOf } from '../lib/requests.js';
import { f, info, int, numFlag, strFlag, type Scenario } from '../lib/scenario.js';
import { RELAY_NAMES, parseRelay, withSession } from '../lib/session.js';
import { wrk } from '../lib/wrk.js';
import { FREE_TIER_OUT_OF_REACH } from './throughput.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A frame's file, short: a package's name, a node: module, or a path in the checkout. */
function where(url: string): string {
  if (!url) return '(native)';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  const nm = path.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = path.slice(nm + 'node_modules/'.length).split('/');
    return rest.slice(0, rest[0]!.startsWith('@') ? 2 : 1).join('/');
  }
  if (path.startsWith('node:')) return path;
  return relative(ROOT_DIR, path).replace(/^bench\/\.build\//, '');
}

/** Self time (µs) per frame and per module, largest first. */
function selfTimes(p: CpuProfile): { frames: Array<[string, number]>; modules: Array<[string, number]> } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const frames = new Map<string, number>();
  const modules = new Map<string, number>();
  p.samples.forEach((id, i) => {
    const us = p.timeDeltas[i] ?? 0;
    const cf = byId.get(id)!.callFrame;
    const loc = where(cf.url);
    const frame = cf.url ? `${cf.functionName || '(anonymous)'}  ${loc}:${cf.lineNumber + 1}` : cf.functionName;
    const mod = cf.url ? (loc.startsWith('src/') ? loc : loc.replace(/^node:internal\/.*$/, 'node:internal')) : cf.functionName.startsWith('(') ? cf.functionName : '(native)';
    frames.set(frame, (frames.get(frame) ?? 0) + us);
    modules.set(mod, (modules.get(mod) ?? 0) + us);
  });
  const sorted = (m: Map<string, number>): Array<[string, number]> => [...m].sort((a, b) => b[1] - a[1]);
  return { frames: sorted(frames), modules: sorted(modules) };
}

export const profile: Scenario = {
  name: 'profile',
  summary: 'a CPU profile of sluice (or bare http-proxy) under load: top frames and modules',
  flags: {
    variant: { type: 'string', help: 'paid | free | bare (default paid)' },
    seconds: { type: 'string', help: 'seconds of measured load (default 10)' },
    relay: { type: 'string', help: 'standin | minimal (default standin)' },
  },
  async run(ctx) {
    const variant = strFlag(ctx, 'variant') ?? 'paid';
    if (!['paid', 'free', 'bare'].includes(variant)) throw new Error(`--variant must be paid, free or bare, not ${variant}`);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 2 : 10);
    const relayProfile = parseRelay(strFlag(ctx, 'relay'), false);
    const dir = mkdtempSync(join(tmpdir(), 'sluice-cpuprof-'));
    const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=250'];
    const body = variant === 'free' ? FREE_BODY : PAID_BODY;
    try {
      return await withSession(async (s) => {
        const server: Server =
          variant === 'bare'
            ? await s.server('bare', 'bare.ts', relayProfile, { nodeArgs })
            : await s.sluice(relayProfile, { name: 'sluice', config: FREE_TIER_OUT_OF_REACH, nodeArgs });
        await expectStatus(server, body);
        const warm = await wrk({ url: chatUrl(server), connections: 32, seconds: ctx.quick ? 1 : 3, body, keys: keysOf(server) });
        const load = await wrk({ url: chatUrl(server), connections: 32, seconds, body, keys: keysOf(server) });
        ctx.log(`${int(load.rps)} req/s under the profiler`);
        await s.stop(server); // the profile is written as the process exits
        const file = readdirSync(dir).find((n) => n.endsWith('.cpuprofile'));
        if (!file) throw new Error(`no profile written (${server.tail()})`);
        const raw = ctx.artifact(`profile-${variant}.cpuprofile`);
        renameSync(join(dir, file), raw);
        const { frames, modules } = selfTimes(JSON.parse(readFileSync(raw, 'utf8')) as CpuProfile);
        const total = frames.reduce((a, [, us]) => a + us, 0);
        const busy = frames.filter(([k]) => k !== '(idle)').reduce((a, [, us]) => a + us, 0);
        const requests = warm.requests + load.requests;
        const line = ([k, us]: [string, number]): string => `${f((us / total) * 100, 1).padStart(5)} %  ${f(us / requests, 2).padStart(6)} µs/req  ${k}`;
        const report =
          `${variant === 'bare' ? 'bare http-proxy' : `sluice, ${variant} path`}, ${RELAY_NAMES[relayProfile]}; wrk 32 connections, ${seconds} s at ${int(load.rps)} req/s under the profiler ` +
          `(sampling every 250 µs; start-up and warm-up included): ${f(busy / requests, 1)} µs of main-thread time per request.\n\n` +
          `Top self-time frames:\n\n\`\`\`\n${frames.slice(0, 30).map(line).join('\n')}\n\`\`\`\n\nSelf time per module:\n\n\`\`\`\n${modules.slice(0, 25).map(line).join('\n')}\n\`\`\`\n\n` +
          `Raw profile: ${relative(ROOT_DIR, raw)}\n`;
        return {
          report,
          checks: [info(`main-thread time per request under the profiler, ${variant}`, `${f(busy / requests, 1)} µs`)],
          data: { rps: load.rps, requests, frames: frames.slice(0, 100), modules },
        };
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
