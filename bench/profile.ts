/**
 * CPU profile of sluice on the paid path under load:
 *
 *   npx tsx bench/profile.ts    (BENCH_PROFILE_VARIANT=free: free-tier path; =embedded: free-tier path on the embedded store; =bare: bare http-proxy)
 *
 * Compiles (as bench/run.ts does), starts the relay stand-in and one sluice (Redis store, own redis-server) under
 * `node --cpu-prof`, drives it with wrk (32 connections, 10 s after a 3 s warm-up), stops it so
 * the profile is written, and prints the top self-time frames and the self time per module.
 * Writes bench/PROFILE.md; the raw .cpuprofile stays in a temporary directory (path printed),
 * loadable in Chrome DevTools.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { spawnRedis } from '../test/support/redis.js';
import { BENCH_DIR, ROOT_DIR, compile, startNodeServer, type Server } from './lib/proc.js';
import { wrk } from './lib/wrk.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const variant = (['free', 'embedded', 'bare'] as const).find((v) => v === process.env.BENCH_PROFILE_VARIANT) ?? 'paid';
const seconds = Number(process.env.BENCH_PROFILE_SECONDS ?? 10);
const model = variant === 'free' || variant === 'embedded' ? 'vend-flash-free' : 'gpt-4o-mini';
const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });

function where(url: string): string {
  if (!url) return '(native)';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  const nm = path.lastIndexOf('node_modules/');
  if (nm !== -1) return path.slice(nm + 'node_modules/'.length).split('/').slice(0, path.slice(nm + 13).startsWith('@') ? 2 : 1).join('/');
  if (path.startsWith('node:')) return path;
  return relative(ROOT_DIR, path).replace(/^bench\/\.build\//, '');
}

function analyse(p: Profile): { frames: Array<[string, number]>; modules: Array<[string, number]>; totalMs: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const frames = new Map<string, number>();
  const modules = new Map<string, number>();
  let total = 0;
  for (const [id, us] of self) {
    const cf = byId.get(id)!.callFrame;
    const name = cf.functionName || '(anonymous)';
    const loc = where(cf.url);
    const key = cf.url ? `${name}  ${loc}:${cf.lineNumber + 1}` : name;
    frames.set(key, (frames.get(key) ?? 0) + us);
    const mod = cf.url ? (loc.startsWith('src/') || loc.startsWith('bench/') ? loc : loc.split(':')[0]!.replace(/^node:internal\/.*$/, 'node:internal')) : name.startsWith('(') ? name : '(native)';
    modules.set(mod, (modules.get(mod) ?? 0) + us);
    total += us;
  }
  const sort = (m: Map<string, number>): Array<[string, number]> => [...m.entries()].sort((a, b) => b[1] - a[1]);
  return { frames: sort(frames), modules: sort(modules), totalMs: total / 1000 };
}

async function main(): Promise<void> {
  const typeErrors = await compile();
  if (typeErrors) process.stderr.write(`tsc reported type errors (output used anyway):\n${typeErrors}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cpuprof-'));
  const redis = await spawnRedis();
  const servers: Server[] = [];
  try {
    const relay = await startNodeServer('relay', 'relay.ts');
    servers.push(relay);
    const sluice = await startNodeServer(variant === 'bare' ? 'bare' : 'sluice', variant === 'bare' ? 'bare.ts' : 'sluice.ts', {
      env: { BENCH_UPSTREAM: `http://127.0.0.1:${relay.info.port as number}`, ...(variant === 'embedded' ? {} : { BENCH_REDIS_URL: redis.url }) },
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=250'],
    });
    servers.push(sluice);
    const url = `http://127.0.0.1:${sluice.info.port as number}/v1/chat/completions`;
    const keys = (sluice.info.keys as string[] | undefined) ?? ['sk-' + 'x'.repeat(48)];
    const warm = await wrk({ url, connections: 32, seconds: 3, body, keys });
    const r = await wrk({ url, connections: 32, seconds, body, keys });
    const requests = warm.requests + r.requests;
    process.stderr.write(`load: ${r.rps.toFixed(0)} req/s, p99 ${r.p99.toFixed(2)} ms, non-2xx ${r.non2xx}\n`);
    await sluice.stop();
    servers.pop();
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no profile written in ${dir}`);
    const a = analyse(JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile);
    const pct = (us: number): string => ((us / 1000 / a.totalMs) * 100).toFixed(1).padStart(5) + ' %';
    const perReq = (us: number): string => (us / requests).toFixed(2).padStart(6) + ' µs/req';
    const line = ([k, us]: [string, number]): string => `${pct(us)}  ${(us / 1000).toFixed(0).padStart(6)} ms  ${perReq(us)}  ${k}`;
    const frames = a.frames.slice(0, 30).map(line);
    const modules = a.modules.slice(0, 25).map(line);
    const busyUs = a.frames.filter(([k]) => k !== '(idle)').reduce((x, [, us]) => x + us, 0);
    const out =
      `# CPU profile: ${variant === 'bare' ? 'bare http-proxy' : `sluice, ${variant} path`}, under load\n\n` +
      `\`${variant === 'paid' ? '' : `BENCH_PROFILE_VARIANT=${variant} `}npx tsx bench/profile.ts\` on ${new Date().toISOString()}; ` +
      `wrk 32 connections, ${seconds} s at ${r.rps.toFixed(0)} req/s (profiling slows the process); ` +
      `sampling every 250 µs, ${a.totalMs.toFixed(0)} ms of samples (start-up and warm-up included), ${requests} requests: ` +
      `${(busyUs / requests).toFixed(1)} µs of main-thread time per request (idle excluded).\n\n` +
      `## Top self-time frames\n\n\`\`\`\n${frames.join('\n')}\n\`\`\`\n\n## Self time per module\n\n\`\`\`\n${modules.join('\n')}\n\`\`\`\n\n` +
      `Raw profile: ${join(dir, file)}\n`;
    process.stdout.write(out);
    writeFileSync(join(BENCH_DIR, variant === 'paid' ? 'PROFILE.md' : `PROFILE-${variant}.md`), out);
  } finally {
    await Promise.all(servers.map((s) => s.stop().catch(() => {})));
    await redis.kill();
  }
}

setTimeout(() => {
  process.stderr.write('profile exceeded 2 minutes; aborting\n');
  process.exit(1);
}, 120_000).unref();

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
