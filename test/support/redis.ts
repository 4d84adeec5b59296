/**
 * Redis helpers for tests.
 *
 * - `spawnRedis()` starts a private `redis-server` (from PATH) on a free loopback port, for tests that
 *   need to break Redis (pause it, kill it, bring it back) without disturbing other test files.
 * - `uniquePrefix()` / `flushTestDb()` keep test files isolated on the shared Redis that the global
 *   setup provides (`inject('redisUrl')`).
 *
 * Also used by `test/setup/redis.ts` (the vitest globalSetup) to spawn the shared server when neither
 * `REDIS_URL` nor a Docker engine is available.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants as fsConstants, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, delimiter, join } from 'node:path';
import { Redis } from 'ioredis';
import { eventually, GiveUp } from './time.js';

export interface SpawnedRedis {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Pid of the current redis-server process (changes after `restart()`). */
  readonly pid: number;
  /** SIGSTOP: the server keeps its sockets open but stops answering (a hung Redis). */
  pause(): void;
  /** SIGCONT: undo `pause()`. */
  resume(): void;
  /** Stop the server (SIGKILL by default: an abrupt crash) and wait until it has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Kill the server if it still runs, then start a fresh, empty one on the same port. */
  restart(): Promise<void>;
}

export interface SpawnRedisOptions {
  /** Port to listen on; default: a free loopback port. */
  port?: number;
  /** Extra `redis-server` arguments, e.g. `['--requirepass', 'secret']`. */
  args?: string[];
  /** How long to wait for the first PONG. Default 10 000 ms. */
  readyTimeoutMs?: number;
}

const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 5_000;
const LOG_TAIL_BYTES = 4_096;

/** Every redis-server spawned by this process, so a crashing test run does not leave orphans. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  });
}

/** Absolute path of an executable found on PATH, or undefined. */
export function findOnPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

function redisServerBinary(): string {
  const found = findOnPath('redis-server');
  if (!found) {
    throw new Error(
      'redis-server was not found on PATH. Tests that spawn a private Redis need it: ' +
        'install it (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`) ' +
        'or run `.ci/run`, which installs it.',
    );
  }
  return found;
}

/** A free TCP port on 127.0.0.1 (listen on port 0, read the port, close). */
export async function freePort(): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not read the port of a probe listener'));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * One raw `PING` over TCP; resolves true on `+PONG` (or a `-NOAUTH` error, which also proves the
 * server answers), false on anything else within `timeoutMs`. Never throws.
 */
export async function pingOnce(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    let settled = false;
    let buffered = '';
    const socket: Socket = createConnection({ host, port });
    const done = (ok: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.setNoDelay(true);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      if (buffered.includes('\r\n')) done(buffered.startsWith('+PONG') || buffered.startsWith('-NOAUTH'));
    });
    socket.once('error', () => done(false));
    socket.once('close', () => done(false));
  });
}

interface Started {
  child: ChildProcess;
  tail: () => string;
  exited: Promise<void>;
}

function startServer(bin: string, port: number, dir: string, extraArgs: string[]): Started {
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    '--loglevel',
    'warning',
    ...extraArgs,
  ];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const collect = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-LOG_TAIL_BYTES);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  // Do not keep the test worker alive because of the server or its pipes; the exit hook kills it.
  child.unref();
  (child.stdout as Socket | null)?.unref?.();
  (child.stderr as Socket | null)?.unref?.();
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  child.once('error', () => {
    /* reported through waitReady (spawn failures end in 'exit' or leave pid undefined) */
  });
  live.add(child);
  void exited.then(() => live.delete(child));
  return { child, tail: () => log.trim(), exited };
}

async function waitReady(started: Started, port: number, timeoutMs: number): Promise<void> {
  let gone = false;
  void started.exited.then(() => {
    gone = true;
  });
  try {
    await eventually(
      async () => {
        if (gone || started.child.pid === undefined) {
          throw new GiveUp(
            `redis-server on port ${port} exited before answering PING ` +
              `(exit code ${String(started.child.exitCode)}, signal ${String(started.child.signalCode)}).` +
              (started.tail() ? `\nredis-server output:\n${started.tail()}` : ''),
          );
        }
        if (!(await pingOnce('127.0.0.1', port, 250))) throw new Error('no answer to PING.' + (started.tail() ? `\nredis-server output:\n${started.tail()}` : ''));
      },
      { timeoutMs, intervalMs: 50, what: `redis-server on port ${port}` },
    );
  } catch (err) {
    if (!(err instanceof GiveUp)) started.child.kill('SIGKILL');
    throw err;
  }
}

async function stop(started: Started, signal: NodeJS.Signals): Promise<void> {
  const { child } = started;
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill(signal);
      // A stopped (paused) process only acts on SIGTERM/SIGINT once it runs again.
      if (signal !== 'SIGKILL') child.kill('SIGCONT');
    } catch {
      /* already gone */
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      started.exited.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), EXIT_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      child.kill('SIGKILL');
      await started.exited;
    }
  }
}

/**
 * Start a private `redis-server` on a free loopback port (no persistence, scratch directory) and wait
 * until it answers PING. Throws a clear error when `redis-server` is not installed.
 * Always `await handle.kill()` in `afterAll`.
 */
export async function spawnRedis(options: SpawnRedisOptions = {}): Promise<SpawnedRedis> {
  const bin = redisServerBinary();
  installExitHook();
  const readyTimeoutMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const extraArgs = options.args ?? [];
  let dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));

  // A free port can be taken between probing and binding; retry with a new one (unless fixed).
  let port = 0;
  let current: Started | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < (options.port === undefined ? 3 : 1); attempt++) {
    port = options.port ?? (await freePort());
    const started = startServer(bin, port, dir, extraArgs);
    try {
      await waitReady(started, port, readyTimeoutMs);
      current = started;
      break;
    } catch (err) {
      lastError = err;
      await stop(started, 'SIGKILL');
    }
  }
  if (!current) {
    rmSync(dir, { recursive: true, force: true });
    throw lastError instanceof Error ? lastError : new Error(String(lastError));
  }

  let active: Started = current;
  let removed = false;
  const signal = (sig: NodeJS.Signals): void => {
    if (active.child.exitCode !== null || active.child.signalCode !== null) {
      throw new Error(`redis-server on port ${port} is not running (cannot send ${sig})`);
    }
    active.child.kill(sig);
  };

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get pid(): number {
      return active.child.pid ?? -1;
    },
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    async kill(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
      await stop(active, sig);
      if (!removed) {
        removed = true;
        rmSync(dir, { recursive: true, force: true });
      }
    },
    async restart(): Promise<void> {
      await stop(active, 'SIGKILL');
      if (removed) {
        // kill() removed the scratch directory; give the new server a fresh one.
        dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
        removed = false;
      }
      const started = startServer(bin, port, dir, extraArgs);
      try {
        await waitReady(started, port, readyTimeoutMs);
      } catch (err) {
        await stop(started, 'SIGKILL');
        throw err;
      }
      active = started;
    },
  };
}

/**
 * A key prefix unique to this test file and run, e.g. `uniquePrefix(import.meta.url)` or
 * `uniquePrefix('limiter')` → `t:limiter:4242:9f3c1a2b:`. Use it for every key a test writes so
 * files running in parallel on the shared Redis never see each other's keys.
 */
export function uniquePrefix(name: string): string {
  const base = basename(name.replace(/^file:\/\//, '')).replace(/(\.(test|spec))?\.[cm]?[jt]sx?$/, '');
  const safe = base.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 40) || 'test';
  return `t:${safe}:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

/** Escape Redis glob metacharacters so a prefix matches literally in `SCAN MATCH`. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\^-]/g, (c) => `\\${c}`);
}

/**
 * Delete test keys. With a `prefix`, deletes only the keys starting with it (safe on the shared
 * Redis while other files run); without one, `FLUSHDB` on the URL's database — only for a private
 * server from `spawnRedis()`.
 */
export async function flushTestDb(url: string, prefix?: string): Promise<number> {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5_000,
    retryStrategy: () => null,
  });
  try {
    await client.connect();
    if (prefix === undefined || prefix === '') {
      const before = await client.dbsize();
      await client.flushdb();
      return before;
    }
    let deleted = 0;
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${escapeGlob(prefix)}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) deleted += await client.unlink(...keys);
    } while (cursor !== '0');
    return deleted;
  } finally {
    client.disconnect();
  }
}
