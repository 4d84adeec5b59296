import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { buildConfig, publicConfig } from '../config/index.js';
import pino from 'pino';
import { HOLD_BYTES, HOLD_MS, createLogger, isoTimeCached, logDestination, type HeldDestination } from './index.js';
import { nextTurn, sleep } from '../../test/support/time.js';

function capture(): { log: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString());
      cb();
    },
  });
  return {
    log: createLogger('info', sink),
    lines: () =>
      out
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
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
    const config = buildConfig(
      { upstream: { credential: SECRET } },
      {
        SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000',
        SLUICE_ADMIN_TOKEN: SECRET,
        SLUICE_REDIS_URL: `redis://:${SECRET}@127.0.0.1:6379`,
      },
    );
    const { log, lines } = capture();
    log.info({ config: { ...config, upstream: { ...config.upstream, url: config.upstream.url.href } } }, 'raw');
    log.info({ config: publicConfig(config) }, 'public');
    expect(JSON.stringify(lines())).not.toContain(SECRET);
  });

  it('logs a config as the reload line does: a set secret as [redacted], an unset one as null, relayDb.url by its file key', () => {
    const config = buildConfig({ upstream: { credential: SECRET } }, { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000', SLUICE_RELAY_DB: `postgres://u:${SECRET}@db/newapi` });
    const { log, lines } = capture();
    log.info({ config: publicConfig(config) }, 'config reloaded');
    const logged = lines()[0]!.config as { upstream: Record<string, unknown>; redis: Record<string, unknown>; relayDb: Record<string, unknown> };
    expect([logged.upstream.credential, logged.redis.url, logged.relayDb.url]).toEqual(['[redacted]', null, '[redacted]']);
    expect(logged.upstream.url).toBe('http://127.0.0.1:3000/');
    expect(logged).not.toHaveProperty('adminToken');
    expect(JSON.stringify(lines())).not.toContain(SECRET);
  });
});

describe('log destination', () => {
  function runScript(body: string): { status: number | null; msgs: string[]; stderr: string } {
    const script = `import { createLogger } from './src/log/index.ts';\n${body}`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: join(import.meta.dirname, '..', '..'),
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(r.error, r.stderr).toBeUndefined();
    return {
      status: r.status,
      stderr: r.stderr,
      msgs: r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { msg: string }).msg),
    };
  }

  it('writes what it holds to stdout when the process exits, even through process.exit, lines of the turn included', () => {
    const r = runScript(`
      const { infoLine } = await import('./src/log/index.ts');
      const log = createLogger('info');
      log.info({ port: 8080 }, 'listening');
      infoLine(log, (id) => ({ reqId: id }), 'request')('r-1');
      log.error({ reason: 'test' }, 'failed');
      process.exit(1);
    `);
    expect(r.status, r.stderr).toBe(1);
    expect(r.msgs).toEqual(['listening', 'failed', 'request']);
  });

  it('writes what it holds when an uncaught exception ends the process', () => {
    const r = runScript(`
      const log = createLogger('info');
      log.info('before');
      const { infoLine } = await import('./src/log/index.ts');
      setImmediate(() => { infoLine(log, (id) => ({ reqId: id }), 'request')('r-1'); log.info('last'); throw new Error('boom'); });
    `);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('boom');
    expect(r.msgs).toEqual(['before', 'last', 'request']);
  });

  it('calls a flush back without an error when stdout is a pipe (which cannot be fsynced)', () => {
    const r = runScript(`
      const log = createLogger('info');
      log.info('one');
      log.flush((err) => process.stderr.write('flushed ' + (err ? err.code : 'ok') + '\\n'));
    `);
    expect(r.stderr).toContain('flushed ok');
    expect(r.msgs).toEqual(['one']);
  });

  it("keeps serving, and flush still calls back, when stdout's reader has gone (EPIPE); every line after it counts as dropped", async () => {
    const script = `import { createLogger, droppedLogBytes } from './src/log/index.ts';
      const log = createLogger('info');
      log.info('one');
      setTimeout(() => {
        log.info('two');
        log.flush((err) => { process.stderr.write('flushed ' + (err ? err.code : 'ok') + ' dropped ' + droppedLogBytes(log) + '\\n'); process.exit(0); });
      }, 300);
      setTimeout(() => { process.stderr.write('flush never called back\\n'); process.exit(2); }, 3000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: join(import.meta.dirname, '..', '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader of its stdout is gone
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(stderr).toContain('stdout is closed (EPIPE)');
    // Both lines, 'one' (held when the write failed) and 'two' (handed after).
    const line = (msg: string): number => Buffer.byteLength(`${JSON.stringify({ level: 30, time: new Date().toISOString(), svc: 'sluice', msg })}\n`);
    expect(stderr).toContain(`flushed EPIPE dropped ${line('one') + line('two')}\n`);
    expect(code, stderr).toBe(0);
  });

  it('writes what it holds when the process ends on its own', () => {
    const r = runScript(`
      const log = createLogger('info');
      log.info('one');
      setTimeout(() => log.info('two'), 10);
    `);
    expect(r.status, r.stderr).toBe(0);
    expect(r.msgs).toEqual(['one', 'two']);
  });

  /** A destination onto a new file, with the bytes of each write SonicBoom has made so far. */
  async function held(file = join(mkdtempSync(join(tmpdir(), 'sluice-log-')), 'out.log')): Promise<{ dest: HeldDestination; writes: number[]; file: string }> {
    const dest = logDestination(file);
    const writes: number[] = [];
    dest.sink.on('write', (n: number) => writes.push(n));
    await new Promise((r) => dest.sink.once('ready', r));
    return { dest, writes, file };
  }

  it('holds at most its bound while stdout is not read: lines past it are dropped and said on stderr, and writing resumes once it is read', async () => {
    const fifo = join(mkdtempSync(join(tmpdir(), 'sluice-log-')), 'stdout');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    // A reader that never reads until told: the pipe fills (64 KiB), the write under way blocks.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const said: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => (said.push(String(s)), true));
    const bound = 256 * 1024;
    const dest = logDestination(fifo, bound);
    try {
      await once(dest.sink, 'ready');
      const line = `${'x'.repeat(1023)}\n`;
      for (let i = 0; i < 2048; i++) dest.write(line); // 2 MiB
      await sleep(100);
      expect(said.filter((s) => s.includes('lines are dropped'))).toHaveLength(1);
      // Read everything until the flush says all is written or dropped.
      let read = 0;
      const buf = Buffer.alloc(64 * 1024);
      let done = false;
      dest.flush(() => (done = true));
      while (!done) {
        try {
          read += readSync(reader, buf);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
          await sleep(10);
        }
      }
      // What is written and still in the pipe.
      for (;;) {
        try {
          read += readSync(reader, buf);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
          break;
        }
      }
      // What got through: the pipe's fill, the write under way, and at most the bound held.
      expect(read % 1024).toBe(0);
      expect(read).toBeLessThanOrEqual(64 * 1024 + 16 * 1024 + bound);
      expect(read).toBeGreaterThan(0);
      const resumed = said.find((s) => s.includes('read again'));
      expect(resumed).toContain(`${2048 * 1024 - read} bytes of log lines were dropped`);
      expect(dest.droppedBytes).toBe(2048 * 1024 - read);
    } finally {
      stderr.mockRestore();
      dest.sink.destroy();
      closeSync(reader);
    }
  });

  it(`holds lines up to ${HOLD_MS} ms and writes them as one write, in order`, async () => {
    const { dest, writes, file } = await held();
    dest.write('a\n');
    dest.write('b\n');
    await nextTurn();
    dest.write('c\n');
    await nextTurn();
    expect(readFileSync(file, 'utf8')).toBe('');
    await sleep(HOLD_MS + 30);
    expect(writes).toEqual([6]);
    expect(readFileSync(file, 'utf8')).toBe('a\nb\nc\n');
    dest.sink.destroy();
  });

  it('writes lines beyond ASCII as the UTF-8 they are (handed on as bytes)', async () => {
    const { dest, file } = await held();
    dest.write('{"model":"通义千问-免费","path":"/v1/é"}\n');
    await new Promise<void>((resolve, reject) => dest.flush((err) => (err ? reject(err) : resolve())));
    expect(readFileSync(file, 'utf8')).toBe('{"model":"通义千问-免费","path":"/v1/é"}\n');
    dest.sink.destroy();
  });

  it(`writes at once, without waiting for its timer, when ${HOLD_BYTES / 1024} KiB have gathered`, async () => {
    // The hold timer cannot fire: only the gathered bytes can start the write.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { dest, writes } = await held();
      const line = 'x'.repeat(1023) + '\n';
      for (let i = 0; i < HOLD_BYTES / 1024 - 1; i++) dest.write(line);
      await nextTurn();
      await nextTurn();
      expect(writes).toEqual([]);
      dest.write(line);
      expect(await once(dest.sink, 'write')).toEqual([HOLD_BYTES]);
      dest.sink.destroy();
    } finally {
      vi.useRealTimers();
    }
  });

  /** Enough lines to start a write at once, and the bytes they make. */
  function startWrite(dest: HeldDestination): void {
    const line = 'x'.repeat(1023) + '\n';
    for (let i = 0; i < HOLD_BYTES / 1024; i++) dest.write(line);
  }

  it('writes a line that came while a write was under way, though its timer fired meanwhile and no line follows', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { dest, writes, file } = await held();
      startWrite(dest);
      dest.write('tail\n');
      const first = once(dest.sink, 'write');
      vi.advanceTimersByTime(HOLD_MS); // the write is still under way: this flush does nothing
      expect(await first).toEqual([HOLD_BYTES]);
      const tail = once(dest.sink, 'write');
      vi.advanceTimersByTime(HOLD_MS);
      expect(await tail).toEqual([5]);
      expect(writes).toEqual([HOLD_BYTES, 5]);
      expect(readFileSync(file, 'utf8').endsWith('x\ntail\n')).toBe(true);
      dest.sink.destroy();
    } finally {
      vi.useRealTimers();
    }
  });

  it('calls a flush back only once the lines that came during a write under way are written too', async () => {
    const { dest, file } = await held();
    startWrite(dest);
    dest.write('tail\n');
    await new Promise<void>((resolve, reject) => dest.flush((err) => (err ? reject(err) : resolve())));
    expect(readFileSync(file, 'utf8')).toHaveLength(HOLD_BYTES + 5);
    dest.sink.destroy();
  });

  it('throws nothing when its timer fires after the sink was destroyed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { dest } = await held();
      dest.write('line\n');
      dest.sink.destroy();
      expect(() => vi.advanceTimersByTime(HOLD_MS * 3)).not.toThrow();
    } finally {
      vi.useRealTimers();
    }
  });

  it('survives a write error: says so on stderr once, and every flush hears of it', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sluice-log-')), 'out.log');
    writeFileSync(file, '');
    // Opened for reading only: every write fails.
    const dest = logDestination(openSync(file, 'r'));
    const said = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      dest.write('line\n');
      const err = (await new Promise<Error | undefined>((resolve) => dest.flush(resolve))) as NodeJS.ErrnoException | undefined;
      expect(err?.code).toBe('EBADF');
      // The failed lines are kept and tried again: a later flush with nothing new says so, not "done".
      const again = (await new Promise<Error | undefined>((resolve) => dest.flush(resolve))) as NodeJS.ErrnoException | undefined;
      expect(again?.code).toBe('EBADF');
      // Said once, though pino's own listener re-emits the error and the second flush met it again.
      expect(said.mock.calls.filter(([m]) => String(m).includes('log write failed'))).toEqual([[`sluice: log write failed: ${err?.message}\n`]]);
    } finally {
      said.mockRestore();
      dest.sink.destroy();
    }
  });

  it('has everything written when a logger flush calls back (the drain path in main)', async () => {
    const { dest, file } = await held();
    const log = createLogger('info', dest);
    log.info('one');
    log.warn('two');
    await new Promise<void>((resolve, reject) => log.flush((err) => (err ? reject(err) : resolve())));
    expect(
      readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { msg: string }).msg),
    ).toEqual(['one', 'two']);
    dest.sink.destroy();
  });
});

describe('log lines', () => {
  it('escape a lone surrogate, so the line reads back as sent, and leave pairs alone', () => {
    const { log, lines } = capture();
    log.info({ model: 'gpt-\ud800-x', emoji: 'a 🚀 b' }, 'odd \udc00');
    expect(lines()[0]).toMatchObject({ model: 'gpt-\ud800-x', emoji: 'a 🚀 b', msg: 'odd \udc00' });
  });
});

describe('log timestamps', () => {
  it("are pino's isoTime, formatted once per millisecond, and the logger uses them", () => {
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
