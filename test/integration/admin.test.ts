import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ADMIN_TOKEN, startHarness, STORE_KINDS, type Harness } from '../support/harness.js';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { freePort, uniquePrefix } from '../support/redis.js';
import { eventually } from '../support/time.js';

const run = promisify(execFile);
const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe.each(STORE_KINDS)('admin API on the %s store', (kind) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: kind });
  });
  afterAll(() => h.close());

  it('answers /healthz and /readyz without a token', async () => {
    expect((await fetch(`${h.adminUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${h.adminUrl}/readyz`)).status).toBe(200);
  });

  it('refuses every /admin call without the right token', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-000000000' }, { authorization: ADMIN_TOKEN }] as Array<Record<string, string>>) {
      const r = await fetch(`${h.adminUrl}/admin/keys?user=x`, { headers });
      expect(r.status).toBe(401);
    }
  });

  it('creates a key shown once, lists it without secrets, deletes it once', async () => {
    const r = await fetch(`${h.adminUrl}/admin/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ user: 'adm', name: 'laptop' }) });
    expect(r.status).toBe(201);
    const created = (await r.json()) as Record<string, string>;
    expect(Object.keys(created).sort()).toEqual(['createdAt', 'id', 'key', 'name', 'user']);
    expect(created.key).toMatch(/^sk-[A-Za-z0-9_-]{32,}$/);
    expect(created).toMatchObject({ user: 'adm', name: 'laptop' });

    const list = await (await fetch(`${h.adminUrl}/admin/keys?user=adm`, { headers: auth })).text();
    expect(list).not.toContain(created.key!.slice(3));
    expect(JSON.parse(list)).toEqual({ keys: [{ id: created.id, user: 'adm', name: 'laptop', createdAt: created.createdAt }] });

    expect((await fetch(`${h.adminUrl}/admin/keys/${created.id}`, { method: 'DELETE', headers: auth })).status).toBe(204);
    expect((await fetch(`${h.adminUrl}/admin/keys/${created.id}`, { method: 'DELETE', headers: auth })).status).toBe(404);
    expect(await (await fetch(`${h.adminUrl}/admin/keys?user=adm`, { headers: auth })).json()).toEqual({ keys: [] });
  });

  it('imports an existing key, with or without sk-, and refuses a duplicate', async () => {
    const body = 'Abcdefghijklmnopqrstuvwxyz012345';
    const r = await fetch(`${h.adminUrl}/admin/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ user: 'imp', key: body }) });
    expect(r.status).toBe(201);
    expect(((await r.json()) as { key: string }).key).toBe(`sk-${body}`);
    const dup = await fetch(`${h.adminUrl}/admin/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ user: 'imp2', key: `sk-${body}` }) });
    expect(dup.status).toBe(409);
    const ok = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${body}` } });
    expect(ok.status).toBe(200);
  });

  it('answers bad admin input with a clear JSON error', async () => {
    const cases: Array<[string, number, string]> = [
      ['not json', 400, 'invalid_json'],
      ['{"name":"x"}', 400, 'invalid_user'],
      ['{"user":"a b"}', 400, 'invalid_user'],
      ['{"user":"a","key":"short"}', 400, 'invalid_key'],
      ['{"user":"a","role":"admin"}', 400, 'unknown_field'],
    ];
    for (const [body, status, code] of cases) {
      const r = await fetch(`${h.adminUrl}/admin/keys`, { method: 'POST', headers: auth, body });
      expect(r.status, body).toBe(status);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe(code);
    }
    expect((await fetch(`${h.adminUrl}/admin/keys`, { headers: auth })).status).toBe(400);
    expect((await fetch(`${h.adminUrl}/admin/nothing`, { headers: auth })).status).toBe(404);
  });

  it('shows a user free-tier state and the effective config without secrets', async () => {
    const s = (await (await fetch(`${h.adminUrl}/admin/users/nobody/limits`, { headers: auth })).json()) as { freeTier: { window: object; day: object } };
    expect(s.freeTier.window).toMatchObject({ limit: 20, windowSeconds: 60, used: 0, remaining: 20, retryAfterSeconds: 0 });
    expect(s.freeTier.day).toMatchObject({ limit: 100, timeZone: 'Asia/Shanghai', used: 0, remaining: 100 });
    const cfg = await (await fetch(`${h.adminUrl}/admin/config`, { headers: auth })).text();
    expect(cfg).not.toContain(ADMIN_TOKEN);
    expect(JSON.parse(cfg).freeTier.perMinute).toBe(20);
  });
});

describe('readiness and the store', () => {
  it('stays ready when Redis stops answering after it answered once (the body and sluice_store_up say so); answers its own 503 with Retry-After under onStoreError: closed', async () => {
    const { spawnRedis } = await import('../support/redis.js');
    const redis = await spawnRedis();
    const h = await startHarness({ store: 'redis', redisUrl: redis.url, redisCommandTimeoutMs: 200, file: { limits: { onStoreError: 'closed' } } });
    const storeUp = async () => /^sluice_store_up (\d)$/m.exec(await (await fetch(`${h.adminUrl}/metrics`)).text())?.[1];
    try {
      const { key } = await h.createKey('ready-closed');
      const call = (model: string) =>
        fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model }) });
      expect((await call('vend-flash')).status).toBe(200); // the key is now known to this replica
      expect((await fetch(`${h.adminUrl}/readyz`)).status).toBe(200);
      expect(await storeUp()).toBe('1');
      await redis.kill();
      await eventually(async () => expect(await storeUp()).toBe('0'), { timeoutMs: 3000, intervalMs: 100 });
      const ready = await fetch(`${h.adminUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ status: 'ready', checks: { store: { kind: 'redis', state: 'failing', error: expect.any(String) } } });
      expect((await fetch(`${h.adminUrl}/healthz`)).status).toBe(200);
      // Paid calls of a known key need no store; a free call is sluice's own 503, with Retry-After.
      expect((await call('vend-flash')).status).toBe(200);
      const free = await call('vend-flash-free');
      expect(free.status).toBe(503);
      expect(free.headers.get('retry-after')).toBe('1');
      expect(((await free.json()) as { error: { code: string } }).error.code).toBe('store_unavailable');
      // An admin call the store cannot serve is the store's failure (503), not sluice's (500).
      const keys = await fetch(`${h.adminUrl}/admin/keys?user=x`, { headers: auth });
      expect(keys.status).toBe(503);
      expect(((await keys.json()) as { error: { code: string } }).error.code).toBe('store_unavailable');
      const limits = await fetch(`${h.adminUrl}/admin/users/x/limits`, { headers: auth });
      expect(limits.status).toBe(503);
      expect(((await limits.json()) as { error: { code: string } }).error.code).toBe('store_unavailable');
    } finally {
      await h.close();
    }
  });

  it('is not ready until Redis has answered once since start (a wrong address keeps a new Pod out), then ready', async () => {
    const { createSluice } = await import('../../src/app.js');
    const { buildConfig } = await import('../../src/config/index.js');
    const { RedisStore } = await import('../../src/store/redis/index.js');
    const { spawnRedis } = await import('../support/redis.js');
    const pino = (await import('pino')).default;
    const port = await freePort();
    const config = buildConfig({}, { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:9', SLUICE_PORT: '0', SLUICE_ADMIN_PORT: '0', SLUICE_REDIS_URL: `redis://127.0.0.1:${port}` });
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, keyPrefix: uniquePrefix('ready-start'), commandTimeoutMs: 200 });
    const sluice = createSluice({ config, store, log: pino({ level: 'silent' }), processMetrics: false });
    const { adminPort } = await sluice.listen();
    const redis = { kill: async () => {} };
    try {
      const r = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
      expect(r.status).toBe(503);
      expect(await r.json()).toMatchObject({ checks: { store: { state: 'starting', error: expect.any(String) } } });
      // It says why: the connection's own error, not ioredis's "Stream isn't writeable".
      const why = await eventually(
        async () => {
          const body = (await (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).json()) as { checks: { store: { error: string } } };
          return /ECONNREFUSED/.test(body.checks.store.error) && body.checks.store.error;
        },
        { timeoutMs: 5000, intervalMs: 100, what: 'the store check to name the connection error' },
      );
      expect(why).toMatch(/^no connection to Redis \(\w+\): connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
      Object.assign(redis, await spawnRedis({ port }));
      await eventually(async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status === 200, {
        timeoutMs: 8000,
        intervalMs: 100,
        what: 'readiness after Redis started',
      });
    } finally {
      await sluice.close();
      await redis.kill();
    }
  });

  it('starts against a Redis that answers without a warning: its first connection is awaited, not reported as a failure', async () => {
    const { createSluice } = await import('../../src/app.js');
    const { buildConfig } = await import('../../src/config/index.js');
    const { capturedLog } = await import('../support/log.js');
    const logs = capturedLog();
    const url = inject('redisUrl');
    const config = buildConfig(
      { redis: { keyPrefix: uniquePrefix('quiet-start') } },
      { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:9', SLUICE_PORT: '0', SLUICE_ADMIN_PORT: '0', SLUICE_REDIS_URL: url },
    );
    const sluice = createSluice({ config, log: logs.log, processMetrics: false });
    try {
      const { adminPort } = await sluice.listen();
      await eventually(async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status === 200, { timeoutMs: 5000, intervalMs: 50, what: 'readiness' });
      expect(logs.lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
      expect(logs.lines.some((l) => l.msg === 'store (Redis) answers')).toBe(true);
    } finally {
      await sluice.close();
    }
  });
});

describe('the sluice command line', () => {
  const cli = (args: string[], env: Record<string, string> = {}) => run('node', ['bin/sluice.js', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  /** Each `cli` call starts Node and compiles the CLI through tsx: seconds each when the suite loads both cores. */
  const CLI_CALLS_MS = 15_000;

  it('runs as an executable through its shebang, which carries the Node flags sluice is meant to run with, as npm run sluice does', async () => {
    const shebang = readFileSync('bin/sluice.js', 'utf8').split('\n')[0];
    expect(shebang).toBe(`#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}`);
    expect((await run('./bin/sluice.js', ['--help'], { encoding: 'utf8' })).stdout).toContain('sluice start');
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.sluice).toBe(`node ${NODE_FLAGS.join(' ')} --import tsx src/cli.ts`);
  });

  it(
    'creates, lists and deletes keys against Redis',
    async () => {
      const env = { SLUICE_REDIS_URL: inject('redisUrl') };
      const user = `cli-${process.pid}-${Date.now()}`;
      const created = JSON.parse((await cli(['keys', 'create', '--user', user, '--name', 'ci'], env)).stdout) as { id: string; key: string };
      expect(created.key).toMatch(/^sk-/);
      const listed = JSON.parse((await cli(['keys', 'list', '--user', user], env)).stdout) as { keys: Array<{ id: string }> };
      expect(listed.keys.map((k) => k.id)).toEqual([created.id]);
      expect((await cli(['keys', 'delete', created.id], env)).stdout).toContain('deleted');
      await expect(cli(['keys', 'delete', created.id], env)).rejects.toMatchObject({ code: 1 });
    },
    4 * CLI_CALLS_MS,
  );

  it('writes keys where the sidecars look: the configured key prefix', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const prefix = uniquePrefix('cli');
    const dir = mkdtempSync('/tmp/sluice-cli-');
    writeFileSync(`${dir}/config.yaml`, `redis:\n  keyPrefix: "${prefix}"\n`);
    const created = JSON.parse((await cli(['keys', 'create', '--user', 'prefixed'], { SLUICE_REDIS_URL: inject('redisUrl'), SLUICE_CONFIG: `${dir}/config.yaml` })).stdout) as {
      key: string;
    };
    const h = await startHarness({ store: 'redis', prefix });
    try {
      const r = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${created.key}` } });
      expect(r.status).toBe(200);
    } finally {
      await h.close();
    }
  });

  it(
    'exits 2 on a usage error, before touching Redis',
    async () => {
      const unreachable = { SLUICE_REDIS_URL: 'redis://127.0.0.1:1' };
      await expect(cli(['keys', 'list', '--usr', 'x'], unreachable)).rejects.toMatchObject({ code: 2 });
      await expect(cli(['keys', 'frobnicate'], unreachable)).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('usage') });
      await expect(cli(['keys', 'list', '--user', 'x'], unreachable)).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('cannot reach Redis') });
    },
    3 * CLI_CALLS_MS,
  );

  it(
    'validates a config file and names the bad key',
    async () => {
      const { mkdtempSync, writeFileSync } = await import('node:fs');
      const dir = mkdtempSync('/tmp/sluice-cli-');
      writeFileSync(`${dir}/ok.yaml`, 'freeTier:\n  perMinute: 10\n');
      writeFileSync(`${dir}/bad.yaml`, 'freeTier:\n  perMinute: ten\n');
      const ok = await cli(['config', 'check', `${dir}/ok.yaml`]);
      expect(ok.stderr).toContain('valid');
      expect(JSON.parse(ok.stdout)).toMatchObject({ freeTier: { perMinute: 10 } });
      await expect(cli(['config', 'check', `${dir}/bad.yaml`])).rejects.toMatchObject({ code: 78, stderr: expect.stringContaining('freeTier.perMinute') });
    },
    2 * CLI_CALLS_MS,
  );
});

describe('npm start', () => {
  it('stops with a clear message when SLUICE_UPSTREAM_URL is missing', async () => {
    const env = { ...process.env };
    delete env.SLUICE_UPSTREAM_URL;
    await expect(run('node', ['--import', 'tsx', 'src/main.ts'], { env, encoding: 'utf8' })).rejects.toMatchObject({
      code: 78,
      stderr: expect.stringContaining('SLUICE_UPSTREAM_URL is required'),
    });
  });

  /** Starts `node <args>` with a local config, waits for 'sluice listening', runs `check` on its stdout, then SIGTERMs it. */
  async function started(args: string[], check: (out: string, ports: { port: number; adminPort: number }) => Promise<void>): Promise<number | null> {
    const port = await freePort();
    const adminPort = await freePort();
    const child = spawn('node', args, {
      env: { ...process.env, SLUICE_UPSTREAM_URL: 'http://127.0.0.1:9', SLUICE_PORT: String(port), SLUICE_ADMIN_PORT: String(adminPort), SLUICE_HOST: '127.0.0.1' },
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await eventually(() => out.includes('sluice listening'), { timeoutMs: 15_000, intervalMs: 100, what: '"sluice listening"' });
      await check(out, { port, adminPort });
      const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      return await exit;
    } finally {
      child.kill('SIGKILL');
    }
  }

  it('runs with the Node flags sluice is meant to run with, warns that the embedded store is for one replica, serves, and exits 0 on SIGTERM', async () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    const [bin, ...args] = pkg.scripts.start!.split(' ');
    expect(bin).toBe('node');
    expect(args).toEqual([...NODE_FLAGS, '--import', 'tsx', 'src/main.ts']);
    const code = await started(args, async (out, { port, adminPort }) => {
      expect(out).toMatch(/embedded in-process store.*one replica/);
      expect(out).not.toContain('Node flags');
      expect((await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/v1/models`)).status).toBe(401);
    });
    expect(code).toBe(0);
  });

  it('says which Node flags are missing when started without them, and serves anyway', async () => {
    const code = await started(['--import', 'tsx', 'src/main.ts'], async (out, { adminPort }) => {
      const line = out.split('\n').find((l) => l.includes('Node flags'));
      expect(line, out).toBeDefined();
      expect((JSON.parse(line!) as { missing: Array<{ flag: string }> }).missing.map((m) => m.flag)).toEqual([...NODE_FLAGS]);
      expect((await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status).toBe(200);
    });
    expect(code).toBe(0);
  });
});
