/**
 * Redis Sentinel for tests: `redis-server --sentinel` processes on free loopback ports, watching a
 * master spawned with `spawnRedis()`. Always `await sentinels.kill()` in `afterAll`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { findOnPath, freePort, pingOnce } from './redis.js';
import { eventually } from './time.js';

export interface Sentinels {
  /** The master's name the sentinels know it by. */
  readonly name: string;
  readonly ports: number[];
  /** `127.0.0.1:<port>` of each, as SLUICE_REDIS_SENTINELS takes them (joined with commas). */
  readonly addresses: string[];
  /** Asks the first sentinel; resolves with its answer (the port of the master it names). */
  masterPort(): Promise<number>;
  /** Asks `sentinel` (index) a SENTINEL subcommand. */
  ask(args: string[], sentinel?: number): Promise<unknown>;
  kill(): Promise<void>;
}

export interface SentinelOptions {
  /** How many sentinels (default 3). */
  count?: number;
  /** Sentinels that must agree the master is down (default: a majority). */
  quorum?: number;
  name?: string;
  downAfterMs?: number;
}

export async function spawnSentinels(masterPort: number, opts: SentinelOptions = {}): Promise<Sentinels> {
  const bin = findOnPath('redis-server');
  if (!bin) throw new Error('redis-server was not found on PATH (Sentinel runs as `redis-server --sentinel`)');
  const count = opts.count ?? 3;
  const quorum = opts.quorum ?? Math.floor(count / 2) + 1;
  const name = opts.name ?? 'mymaster';
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'));
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  const kill = async (): Promise<void> => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  const onExit = (): void => {
    for (const c of children) c.kill('SIGKILL');
  };
  process.once('exit', onExit);
  try {
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      // Sentinel rewrites its own file: one per sentinel.
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} ${quorum}`,
          `sentinel down-after-milliseconds ${name} ${opts.downAfterMs ?? 2000}`,
          `sentinel failover-timeout ${name} 10000`,
          '',
        ].join('\n'),
      );
      const child = spawn(bin, [conf, '--sentinel'], { stdio: 'ignore' });
      child.unref();
      children.push(child);
      ports.push(port);
    }
    const deadline = Date.now() + 10_000;
    for (const port of ports) {
      await eventually(() => pingOnce('127.0.0.1', port, 250), { timeoutMs: Math.max(0, deadline - Date.now()), intervalMs: 50, what: `sentinel on port ${port} to answer PING` });
    }
  } catch (err) {
    await kill();
    throw err;
  }
  const ask = async (args: string[], sentinel = 0): Promise<unknown> => {
    const c = new Redis({ host: '127.0.0.1', port: ports[sentinel]!, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => {});
    try {
      await c.connect();
      return await c.call('SENTINEL', ...args);
    } finally {
      c.disconnect();
    }
  };
  return {
    name,
    ports,
    addresses: ports.map((p) => `127.0.0.1:${p}`),
    ask,
    async masterPort() {
      const m = (await ask(['get-master-addr-by-name', name])) as string[] | null;
      return Number(m?.[1]);
    },
    async kill() {
      process.off('exit', onExit);
      await kill();
    },
  };
}
