/**
 * sluice started as an operator starts it: `node <production flags> src/main.js` (the image's
 * command, on this checkout's compiled tree or an `ab` build), configured through its environment
 * and a config file, its stdout (where the access line and every other log line go) written to a
 * file, as a container runtime takes it. Settings are the defaults except where a scenario says
 * otherwise: the listeners on loopback ports, the relay, Redis, and what the scenario needs
 * (the free tier raised out of reach for throughput, `accessLog: off` for that variant).
 *
 * The bench learns the ports from the start-up log line and creates its keys through the admin
 * API, as an operator would: it needs nothing from sluice's modules.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { MAIN_JS, ROOT_DIR } from './build.js';
import { adopt, type Server } from './proc.js';
import { sleep } from './scenario.js';

export interface SluiceOptions {
  name: string;
  /** The relay's URL. */
  upstream: string;
  /** Unset: the embedded store. */
  redisUrl?: string;
  /** The config file's settings (SLUICE_CONFIG), e.g. `{ freeTier: { perMinute: 1000000 } }`. */
  config?: Record<string, unknown>;
  /** Further settings by environment variable, e.g. `{ SLUICE_ACCESS_LOG: 'off' }`. */
  env?: Record<string, string>;
  /** Keys to create, one user each, which the load rotates over. Default 256. */
  keys?: number;
  /** The compiled entry point: this checkout's by default, or an `ab` build's. */
  main?: string;
  /** Node flags besides the production ones. */
  nodeArgs?: string[];
}

export interface SluiceServer extends Server {
  adminPort: number;
  /** Where its stdout goes. */
  logFile: string;
  /** Bytes written to its stdout so far. */
  logBytes(): number;
}

const START_TIMEOUT_MS = 30_000;

/** The start-up line (`sluice listening`, with both ports) from the log written so far. */
function listeningLine(logFile: string): { port: number; adminPort: number } | null {
  let text: string;
  try {
    text = readFileSync(logFile, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    if (!line.includes('"adminPort"')) continue;
    try {
      const l = JSON.parse(line) as { port?: unknown; adminPort?: unknown };
      if (typeof l.port === 'number' && typeof l.adminPort === 'number') return { port: l.port, adminPort: l.adminPort };
    } catch {
      // a line still being written
    }
  }
  return null;
}

export async function startSluice(o: SluiceOptions): Promise<SluiceServer> {
  const dir = mkdtempSync(join(tmpdir(), `sluice-bench-${o.name}-`));
  const logFile = join(dir, 'stdout.log');
  const adminToken = randomBytes(24).toString('hex');
  const env: Record<string, string> = {};
  // Only the settings given here: none of the caller's SLUICE_* variables leak in.
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_') && v !== undefined) env[k] = v;
  Object.assign(env, {
    NODE_ENV: 'production',
    SLUICE_UPSTREAM_URL: o.upstream,
    SLUICE_HOST: '127.0.0.1',
    SLUICE_PORT: '0',
    SLUICE_ADMIN_HOST: '127.0.0.1',
    SLUICE_ADMIN_PORT: '0',
    SLUICE_ADMIN_TOKEN: adminToken,
    ...(o.redisUrl ? { SLUICE_REDIS_URL: o.redisUrl } : {}),
    ...o.env,
  });
  if (o.config) {
    env.SLUICE_CONFIG = join(dir, 'sluice.yaml');
    writeFileSync(env.SLUICE_CONFIG, JSON.stringify(o.config, null, 2) + '\n'); // JSON is YAML
  }
  const out = openSync(logFile, 'w');
  const child = spawn(process.execPath, [...NODE_FLAGS, ...(o.nodeArgs ?? []), o.main ?? MAIN_JS], { cwd: ROOT_DIR, env, stdio: ['ignore', out, 'pipe'] });
  closeSync(out);
  adopt(child);
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const fail = (why: string): Error => {
    child.kill('SIGKILL');
    const log = readFileSync(logFile, 'utf8').slice(-2000);
    rmSync(dir, { recursive: true, force: true });
    return new Error(`${o.name}: ${why}\n${err}${log}`);
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  const alive = (): void => {
    if (child.exitCode !== null || child.signalCode !== null) throw fail(`exited (${child.exitCode ?? child.signalCode}) while starting`);
    if (Date.now() > deadline) throw fail(`not ready within ${START_TIMEOUT_MS} ms`);
  };

  let ports: { port: number; adminPort: number } | null = null;
  while (!(ports = listeningLine(logFile))) {
    alive();
    await sleep(50);
  }
  const admin = `http://127.0.0.1:${ports.adminPort}`;
  // Ready: the store is reachable.
  for (;;) {
    alive();
    const r = await fetch(`${admin}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
    await r?.arrayBuffer();
    if (r?.status === 200) break;
    await sleep(50);
  }
  const createKey = async (user: string): Promise<string> => {
    for (;;) {
      alive();
      const r = await fetch(`${admin}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user }),
        signal: AbortSignal.timeout(5000),
      });
      const body = (await r.json()) as { key?: string };
      if (r.status === 201 && body.key) return body.key;
      if (r.status !== 503) throw fail(`creating a key: ${r.status} ${JSON.stringify(body)}`);
      await sleep(50);
    }
  };
  const keys: string[] = [];
  const count = o.keys ?? 256;
  for (let i = 0; i < count; i += 16) {
    keys.push(...(await Promise.all(Array.from({ length: Math.min(16, count - i) }, (_, j) => createKey(`bench-${child.pid}-${i + j}`)))));
  }

  const pid = child.pid!;
  return {
    name: o.name,
    pid,
    port: ports.port,
    adminPort: ports.adminPort,
    keys,
    info: { ...ports, logFile },
    logFile,
    logBytes: () => {
      try {
        return statSync(logFile).size;
      } catch {
        return 0;
      }
    },
    tail: () => err,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // SIGTERM: sluice drains and exits 0 (a profile is written then); bounded all the same.
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
