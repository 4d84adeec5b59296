/**
 * vitest globalSetup: obtain one Redis for the whole test run and hand its URL to the tests.
 *
 * Order:
 *   a. `REDIS_URL` from the environment (must answer PING);
 *   b. a testcontainers `RedisContainer`, when a Docker engine answers `docker info` within 3 s
 *      (`docker --version` is not enough: the CLI can exist with no engine behind it);
 *   c. `redis-server` from PATH, spawned on a free loopback port without persistence.
 * If none works the run fails loudly: Redis tests are never skipped silently.
 *
 * Tests read the URL with `inject('redisUrl')` (typed below). The shared server is shared by test
 * files running in parallel: isolate keys with `uniquePrefix()` from `test/support/redis.ts`.
 */
import { execFile } from 'node:child_process';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { findOnPath, spawnRedis } from '../support/redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis shared by this test run, e.g. `redis://127.0.0.1:6379`. */
    redisUrl: string;
  }
}

const DOCKER_PROBE_TIMEOUT_MS = 3_000;
const DEFAULT_IMAGE = 'redis:7.0';

type Teardown = () => Promise<void>;

interface Source {
  url: string;
  label: string;
  teardown: Teardown;
}

function log(line: string): void {
  process.stdout.write(`[test redis] ${line}\n`);
}

/** `redis://user:secret@host` → `redis://user:***@host`, for logs. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
  }
}

async function answersPing(url: string, timeoutMs = 5_000): Promise<void> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: Error | undefined;
  client.on('error', (err: Error) => {
    lastError = err; // e.g. ECONNREFUSED; ioredis itself only reports "Connection is closed."
  });
  try {
    await client.connect();
    const reply = await client.ping();
    if (reply !== 'PONG') throw new Error(`PING answered ${JSON.stringify(reply)}`);
  } catch (err) {
    if (lastError && err instanceof Error && lastError.message !== err.message) {
      throw new Error(`${err.message} (${lastError.message})`);
    }
    throw err;
  } finally {
    client.disconnect();
  }
}

/** True when a Docker engine answers (`docker info` exits 0 within 3 s), else the reason it does not. */
function dockerEngineAnswers(): Promise<string | true> {
  if (!findOnPath('docker')) return Promise.resolve('no docker CLI on PATH');
  return new Promise((resolve) => {
    execFile('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: DOCKER_PROBE_TIMEOUT_MS, killSignal: 'SIGKILL' }, (error) =>
      resolve(error === null ? true : 'no Docker engine answered `docker info` within 3 s'),
    );
  });
}

async function fromEnv(url: string): Promise<Source> {
  try {
    await answersPing(url);
  } catch (err) {
    throw new Error(`REDIS_URL=${redact(url)} is set but does not answer PING: ${message(err)}`);
  }
  return { url, label: `REDIS_URL (${redact(url)})`, teardown: async () => {} };
}

async function fromContainer(): Promise<Source> {
  const image = process.env.REDIS_IMAGE ?? DEFAULT_IMAGE;
  // Imported lazily: testcontainers is only needed (and only loaded) when an engine answers.
  const { RedisContainer } = await import('@testcontainers/redis');
  const container = await new RedisContainer(image).start();
  const url = container.getConnectionUrl();
  await answersPing(url);
  return {
    url,
    label: `testcontainers ${image} (${url})`,
    teardown: async () => {
      await container.stop();
    },
  };
}

async function fromRedisServer(): Promise<Source> {
  const server = await spawnRedis();
  return {
    url: server.url,
    label: `redis-server from PATH, pid ${server.pid} (${server.url})`,
    teardown: () => server.kill('SIGTERM'),
  };
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function obtainRedis(): Promise<Source> {
  const envUrl = process.env.REDIS_URL?.trim();
  if (envUrl) {
    // An explicit REDIS_URL that does not work is an error, not a reason to use something else.
    return fromEnv(envUrl);
  }

  const failures: string[] = [];

  const docker = await dockerEngineAnswers();
  if (docker === true) {
    try {
      return await fromContainer();
    } catch (err) {
      failures.push(`testcontainers: ${message(err)}`);
      log(`testcontainers failed (${message(err)}); trying redis-server from PATH`);
    }
  } else {
    failures.push(`testcontainers: ${docker}`);
  }

  try {
    return await fromRedisServer();
  } catch (err) {
    failures.push(`redis-server: ${message(err)}`);
  }

  throw new Error(
    [
      'No Redis for the tests. Redis tests are never skipped; provide one of:',
      '  - REDIS_URL=redis://host:port',
      '  - a running Docker engine (for testcontainers)',
      '  - redis-server on PATH (Debian: apt-get install -y redis-server; or run .ci/run)',
      'What was tried:',
      ...failures.map((f) => `  - ${f}`),
      process.env.CI ? '(CI is set: this run must have a Redis.)' : '',
    ]
      .filter(Boolean)
      .join('\n'),
  );
}

export default async function setup(project: TestProject): Promise<Teardown> {
  const source = await obtainRedis();
  log(`using ${source.label}`);
  project.provide('redisUrl', source.url);
  return async () => {
    await source.teardown();
  };
}
