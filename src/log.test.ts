import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { buildConfig, publicConfig } from './config.js';
import pino from 'pino';
import { createLogger, isoTimeCached } from './log.js';

function capture(): { log: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString());
      cb();
    },
  });
  return { log: createLogger('info', sink), lines: () => out.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('log redaction', () => {
  const SECRET = 'sk-live-0123456789abcdefSECRET';

  it('redacts keys, credentials and tokens at the top level and in request headers', () => {
    const { log, lines } = capture();
    log.info({ key: SECRET, credential: SECRET, adminToken: SECRET, token: SECRET }, 'fields');
    log.info({ req: { headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET, 'x-goog-api-key': SECRET } } }, 'request');
    log.info({ headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET, 'x-goog-api-key': SECRET } }, 'headers');
    const text = JSON.stringify(lines());
    expect(text).not.toContain(SECRET);
    expect(lines()[0]).toMatchObject({ key: '[redacted]', credential: '[redacted]', adminToken: '[redacted]', token: '[redacted]' });
  });

  it('redacts the config secrets even if a config were logged whole, not only through publicConfig', () => {
    const config = buildConfig({ upstream: { credential: SECRET } }, {
      SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000',
      SLUICE_ADMIN_TOKEN: SECRET,
      SLUICE_REDIS_URL: `redis://:${SECRET}@127.0.0.1:6379`,
    });
    const { log, lines } = capture();
    log.info({ config: { ...config, upstream: { ...config.upstream, url: config.upstream.url.href } } }, 'raw');
    log.info({ config: publicConfig(config) }, 'public');
    expect(JSON.stringify(lines())).not.toContain(SECRET);
  });
});

describe('log destination', () => {
  it('writes what it holds to stdout when the process exits, even through process.exit', () => {
    const script = `
      import { createLogger } from './src/log.ts';
      const log = createLogger('info');
      log.info({ port: 8080 }, 'listening');
      log.error({ reason: 'test' }, 'failed');
      process.exit(1);
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '..'), encoding: 'utf8', timeout: 15_000 });
    expect(r.error, r.stderr).toBeUndefined();
    expect(r.status, r.stderr).toBe(1);
    const out = r.stdout.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { msg: string }).msg);
    // Both lines, whatever order an in-flight write and the exit flush leave them in.
    expect(out.sort()).toEqual(['failed', 'listening']);
  });
});

describe('log timestamps', () => {
  it('are pino\'s isoTime, formatted once per millisecond, and the logger uses them', () => {
    vi.useFakeTimers({ now: Date.UTC(2026, 10, 23, 3, 48, 0, 5) });
    const toIso = vi.spyOn(Date.prototype, 'toISOString');
    try {
      expect(isoTimeCached()).toBe(',"time":"2026-11-23T03:48:00.005Z"');
      expect(isoTimeCached()).toBe(pino.stdTimeFunctions.isoTime());
      const formatted = toIso.mock.calls.length;
      isoTimeCached();
      isoTimeCached();
      expect(toIso.mock.calls.length).toBe(formatted); // same millisecond: not formatted again
      vi.advanceTimersByTime(1);
      expect(isoTimeCached()).toBe(',"time":"2026-11-23T03:48:00.006Z"');
      const { log, lines } = capture();
      log.info('stamped');
      expect(lines()[0]).toMatchObject({ time: '2026-11-23T03:48:00.006Z' });
    } finally {
      toIso.mockRestore();
      vi.useRealTimers();
    }
  });
});
