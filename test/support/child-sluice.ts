/**
 * sluice as its own process, started the way `npm start` starts it (same Node flags, the
 * Deployment's heap flag), optionally under a lower descriptor limit (`ulimit -n`), so that the
 * hostile tests can read its memory and descriptors from /proc/<pid> while they attack it over
 * loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { metricsText, metricValue } from './helpers.js';
import { eventually, GiveUp } from './time.js';

export const CHILD_ADMIN_TOKEN = 'hostile-admin-token-0123456789';

export interface ChildSluice {
  pid: number;
  url: string;
  port: number;
  adminUrl: string;
  /** The `sluice listening` log line. */
  listening: Record<string, unknown>;
  /** Every JSON log line so far (a line over 1 MiB is counted in the bytes below, not kept). */
  lines(): Array<Record<string, unknown>>;
  /** Bytes written to stdout so far, and the longest line among them. */
  stdout(): { bytes: number; longestLine: number };
  /** Closes the reading end of its stdout, as a log collector that died would: its writes fail with EPIPE. */
  closeStdout(): void;
  createKey(user: string): Promise<string>;
  /** Resident memory now and at its peak since start (VmRSS, VmHWM), in bytes. */
  memory(): { rss: number; peak: number };
  /** Descriptors the process holds now. */
  descriptors(): number;
  /** Resolves with how the process ended, whatever ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` and resolves with how the process ended (`close` still removes its files). */
  stop(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  close(): Promise<void>;
}

export interface ChildOptions {
  relayUrl: string;
  /** The config file's content (JSON is YAML). */
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Soft and hard RLIMIT_NOFILE of the child (`ulimit -n`). */
  nofile?: number;
}

/** Log lines longer than this are counted, not parsed and kept (a test may provoke huge ones). */
const KEEP_LINE_BYTES = 1024 * 1024;

/** The Deployment's heap bound (deploy/base/deployment.yaml, NODE_OPTIONS). */
const DEPLOYMENT_NODE_OPTIONS = '--max-old-space-size=160';

export async function startChildSluice(opts: ChildOptions): Promise<ChildSluice> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-hostile-'));
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, JSON.stringify(opts.config ?? {}));
  const node = [process.execPath, ...NODE_FLAGS, '--import', 'tsx', 'src/main.ts'];
  // `exec` keeps the pid: the one /proc is read from is node's own.
  const argv = opts.nofile === undefined ? node : ['/bin/sh', '-c', `ulimit -n ${opts.nofile} && exec "$@"`, 'sh', ...node];
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? tmpdir(),
      NODE_OPTIONS: DEPLOYMENT_NODE_OPTIONS,
      SLUICE_UPSTREAM_URL: opts.relayUrl,
      SLUICE_HOST: '127.0.0.1',
      SLUICE_ADMIN_HOST: '127.0.0.1',
      SLUICE_PORT: '0',
      SLUICE_ADMIN_PORT: '0',
      SLUICE_ADMIN_TOKEN: CHILD_ADMIN_TOKEN,
      SLUICE_CONFIG: configPath,
      SLUICE_ACCESS_LOG: 'off',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const parsed: Array<Record<string, unknown>> = [];
  // The line being received: its pieces while it stays within KEEP_LINE_BYTES, and its length.
  let pieces: Buffer[] = [];
  let kept = 0;
  let lineLength = 0;
  let bytes = 0;
  let longestLine = 0;
  const take = (piece: Buffer): void => {
    lineLength += piece.length;
    if (kept + piece.length <= KEEP_LINE_BYTES) {
      pieces.push(piece);
      kept += piece.length;
    } else {
      pieces = [];
      kept = Infinity;
    }
  };
  const endLine = (): void => {
    longestLine = Math.max(longestLine, lineLength);
    if (kept !== Infinity) {
      try {
        parsed.push(JSON.parse(Buffer.concat(pieces).toString('utf8')) as Record<string, unknown>);
      } catch {
        /* not a log line */
      }
    }
    pieces = [];
    kept = lineLength = 0;
  };
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => {
    bytes += b.length;
    let at = 0;
    for (let nl = b.indexOf(0x0a); nl !== -1; nl = b.indexOf(0x0a, at)) {
      take(b.subarray(at, nl));
      endLine();
      at = nl + 1;
    }
    take(b.subarray(at));
  });
  child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString('utf8')).slice(-4000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));

  const listening = await eventually(
    () => {
      if (child.exitCode !== null) throw new GiveUp(`the child sluice did not start (exit ${child.exitCode}): ${stderr}`);
      const line = parsed.find((l) => l.msg === 'sluice listening');
      if (line === undefined) throw new Error(`the child sluice did not start: ${stderr}`);
      return line;
    },
    { timeoutMs: 20_000, intervalMs: 50, what: '"sluice listening"' },
  ).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
  const pid = child.pid!;
  const port = listening.port as number;
  const adminUrl = `http://127.0.0.1:${listening.adminPort as number}`;
  const statusKb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(m[1]) * 1024;
  };
  return {
    pid,
    port,
    url: `http://127.0.0.1:${port}`,
    adminUrl,
    listening,
    lines: () => parsed,
    stdout: () => ({ bytes, longestLine }),
    closeStdout: () => child.stdout!.destroy(),
    async createKey(user) {
      const r = await fetch(`${adminUrl}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CHILD_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user }),
      });
      if (r.status !== 201) throw new Error(`createKey: ${r.status} ${await r.text()}`);
      return ((await r.json()) as { key: string }).key;
    },
    memory: () => ({ rss: statusKb('VmRSS'), peak: statusKb('VmHWM') }),
    descriptors: () => readdirSync(`/proc/${pid}/fd`).length,
    exited,
    stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The value of series `name` on the child's /metrics (undefined when absent): test/support/helpers.ts metricValue. */
export async function metric(adminUrl: string, name: string): Promise<number | undefined> {
  return metricValue(await metricsText({ adminUrl }), name);
}
