/**
 * Child processes of the benchmark and what they cost: every server runs in its own process so
 * its CPU time and memory can be read from /proc (Linux only).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { ROOT_DIR, built } from './build.js';

const children = new Set<ChildProcess>();
let hooked = false;

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  const killAll = (): void => {
    for (const c of children) {
      try {
        c.kill('SIGKILL');
      } catch {
        /* gone */
      }
    }
  };
  process.once('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

export interface Server {
  name: string;
  pid: number;
  /** The port it serves on, on 127.0.0.1. */
  port: number;
  /** API keys it accepts, one user each (sluice); none for the others, which take any. */
  keys: string[];
  /** What its ready line said. */
  info: Record<string, unknown>;
  stop(): Promise<void>;
  /** stderr tail, for error messages. */
  tail(): string;
}

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** Node flags besides the production ones (src/runtime/node-flags.ts) every process starts with. */
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}

/** Starts the compiled `bench/servers/<script>` under Node and waits for its `{"ready":true}` line. */
export function startNodeServer(name: string, script: string, opts: StartOptions = {}): Promise<Server> {
  hookExit();
  // Every server runs with the flags production starts sluice with (src/runtime/node-flags.ts).
  const child = spawn(process.execPath, [...NODE_FLAGS, ...(opts.nodeArgs ?? []), built(`servers/${script}`)], {
    cwd: ROOT_DIR,
    env: { ...process.env, NODE_ENV: 'production', ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  let err = '';
  child.stderr!.on('data', (c: Buffer) => {
    err = (err + c.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => children.delete(child));
  return new Promise<Server>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name}: not ready within ${opts.readyTimeoutMs ?? 30_000} ms\n${err}`));
    }, opts.readyTimeoutMs ?? 30_000);
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`${name}: exited (${code ?? sig}) before it was ready\n${err}`));
    });
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (msg.ready !== true) return;
      clearTimeout(timer);
      const pid = child.pid!;
      resolve({
        name,
        pid,
        port: msg.port as number,
        keys: [],
        info: msg,
        tail: () => err,
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), 5000);
          await exited;
          clearTimeout(t);
        },
      });
    });
  });
}

/** Tracks a process started elsewhere (sluice, bench/lib/sluice.ts) for cleanup on exit. */
export function adopt(child: ChildProcess): void {
  hookExit();
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** Clock ticks per second of /proc/<pid>/stat times (100 on Linux almost always). */
const clkTck = ((): number => {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim());
    return n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

/** utime and stime of a process (all its threads), in seconds; zeros once it is gone. */
export function cpuTimes(pid: number): { user: number; sys: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    return { user: Number(fields[11]) / clkTck, sys: Number(fields[12]) / clkTck };
  } catch {
    return { user: 0, sys: 0 };
  }
}

/** utime + stime of a process, in seconds. */
export function cpuSeconds(pid: number): number {
  const t = cpuTimes(pid);
  return t.user + t.sys;
}

/** VmRSS and VmHWM (peak), in MB. */
export function memoryMb(pid: number): { rss: number; hwm: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

/**
 * A process's CPU time (all threads, seconds) and how often its main thread, the one that serves,
 * went to sleep (voluntary context switches: its wake-ups) or was preempted.
 */
export interface ThreadSample {
  user: number;
  sys: number;
  sleeps: number;
  preempted: number;
}

export function threadSample(pid: number): ThreadSample {
  // The status file of the process is its main thread's: the context switches are that thread's.
  let status = '';
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    // gone: zeros
  }
  const field = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { ...cpuTimes(pid), sleeps: field('voluntary_ctxt_switches'), preempted: field('nonvoluntary_ctxt_switches') };
}

/** Per request between two samples: CPU µs (user + system) and wake-ups of the main thread. */
export function perRequest(a: ThreadSample, b: ThreadSample, requests: number): { cpuUs: number; wakeups: number } {
  const n = Math.max(1, requests);
  return { cpuUs: ((b.user - a.user + b.sys - a.sys) / n) * 1e6, wakeups: (b.sleeps - a.sleeps) / n };
}

export interface Usage {
  /** CPU time over wall time, in % of one core. */
  cpuPct: number;
  /** Highest VmRSS sampled during the window, MB. */
  rssMaxMb: number;
}

/** Samples a server's CPU and RSS while `work` runs. */
export async function measureWhile<T>(server: Server | null, work: () => Promise<T>): Promise<{ result: T; usage: Usage }> {
  if (!server) return { result: await work(), usage: { cpuPct: 0, rssMaxMb: 0 } };
  const pid = server.pid;
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  let rssMax = 0;
  const sample = (): void => {
    const rss = memoryMb(pid).rss;
    if (rss > rssMax) rssMax = rss;
  };
  sample();
  const timer = setInterval(sample, 250);
  try {
    const result = await work();
    sample();
    const cpu1 = cpuSeconds(pid);
    const secs = (performance.now() - t0) / 1000;
    return { result, usage: { cpuPct: ((cpu1 - cpu0) / secs) * 100, rssMaxMb: rssMax } };
  } finally {
    clearInterval(timer);
  }
}

/** Runs a command to completion (bounded) and returns stdout; rejects on a non-zero exit. */
export function run(cmd: string, args: string[], opts: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<string> {
  hookExit();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT_DIR, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      children.delete(child);
      reject(e);
    });
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      children.delete(child);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')}: exit ${code ?? sig}\n${err}\n${out}`));
    });
  });
}

/** Output of a command, or '' when it fails or is missing. */
export async function tryRun(cmd: string, args: string[]): Promise<string> {
  try {
    return (await run(cmd, args, { timeoutMs: 10_000 })).trim();
  } catch {
    return '';
  }
}

/** CPU seconds the whole machine spent busy (all cores), from /proc/stat. */
export function systemBusySeconds(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - v[3]! - v[4]!) / clkTck;
  } catch {
    return 0;
  }
}

/** CPU seconds of this process plus its reaped children (wrk, rate client, scan). */
export function selfAndChildrenSeconds(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / clkTck;
  } catch {
    return 0;
  }
}

/**
 * Measures how much CPU processes outside the benchmark took while it ran (other work on a
 * shared machine distorts absolute figures; ratios between alternating variants suffer less).
 */
export class ForeignLoad {
  private busy0 = 0;
  private ours0 = 0;
  private t0 = 0;
  constructor(private readonly ourPids: () => number[]) {}
  private ours(): number {
    return selfAndChildrenSeconds() + this.ourPids().reduce((a, p) => a + cpuSeconds(p), 0);
  }
  start(): void {
    this.busy0 = systemBusySeconds();
    this.ours0 = this.ours();
    this.t0 = performance.now();
  }
  /** CPU % (100 = one core) used by others since start(). */
  stop(): number {
    const secs = (performance.now() - this.t0) / 1000;
    const others = systemBusySeconds() - this.busy0 - (this.ours() - this.ours0);
    return Math.max(0, (others / secs) * 100);
  }
}
