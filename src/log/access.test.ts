import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { accessFields, boundLogged, createAccessLog, loggedModel, LOGGED_FIELD_MAX_CHARS, redactPath, wantsAccessLine, type AccessRecord } from './access.js';
import { createLogger, logDestination } from './index.js';
import type { Outcome } from '../answers/outcome.js';
import { nextTurn } from '../../test/support/time.js';

/** The end of the event-loop turn, when the turn's access lines are built. */

function sink(): { stream: Writable; text: () => string; clear: () => void } {
  let out = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out += chunk.toString();
      cb();
    },
  });
  return { stream, text: () => out, clear: () => (out = '') };
}

/** The line pino itself writes for the same request: what the access log must reproduce. */
function pinoLine(log: Logger, r: AccessRecord, decision: Outcome, totalMs: number): void {
  log.info(accessFields(r, decision, totalMs), 'request');
}

const NOW = 5000;
const base: AccessRecord = { id: 'req-1', method: 'POST', path: '/v1/chat/completions', family: 'openai', ip: '203.0.113.7', start: NOW - 12.3456 };

const strings = [
  'plain',
  '',
  'with "quotes"',
  'back\\slash',
  '\\"',
  'tab\there',
  'nl\nand\u0000nul\u001f',
  'del\u007f',
  'line\u2028sep\u2029',
  'café ünïcode',
  '模型-名称',
  'emoji 🚀 pair',
  'lone \ud800 high',
  'lone \udc00 low',
  '\udbff',
  '🚀'.slice(1) + 'reversed' + '🚀'.slice(0, 1),
  'x'.repeat(150) + '"', // pino's long-string path (JSON.stringify)
  'y'.repeat(99) + '\ud800', // pino's short-string path, at its edge
  'z'.repeat(300) + '\\', // over LOGGED_FIELD_MAX_CHARS
  '</script><script>',
  '{"level":60}',
];

const TIME = Date.UTC(2026, 10, 23, 4, 20, 0, 123);

describe('access line', () => {
  afterEach(() => vi.restoreAllMocks());

  function pair(opts: LoggerOptions = {}): { direct: (r: AccessRecord, d: Outcome) => void; reference: Logger; a: ReturnType<typeof sink>; b: ReturnType<typeof sink> } {
    const a = sink();
    const b = sink();
    const options = { base: { svc: 'sluice' }, timestamp: () => ',"time":"2026-11-23T00:00:00.000Z"', ...opts };
    return { direct: createAccessLog(pino(options, a.stream)), reference: pino(options, b.stream), a, b };
  }

  /** Every field absent and present, every client string in every string field, odd numbers. */
  function records(): AccessRecord[] {
    const out: AccessRecord[] = [base];
    for (const s of strings) {
      out.push({ ...base, path: `/v1beta/models/${s}:generateContent`, model: s, ip: s, id: s, method: s });
      out.push({ ...base, path: s, user: s, keyId: s, shadow: `free_tier:${s}`, freeTier: true, reason: s, status: 429, decidedMs: 0.456789, upstreamMs: 101.239 });
    }
    out.push({ ...base, path: `/sk-${'Ab1'.repeat(12)}/v1/models`, model: 'm'.repeat(5000) });
    out.push({ ...base, model: null, freeTier: false, status: 200, decidedMs: 0, upstreamMs: null });
    out.push({ ...base, user: undefined, keyId: undefined, model: undefined, reason: undefined, status: 0, decidedMs: Number.NaN, upstreamMs: 1e21 });
    out.push({ ...base, status: 502, decidedMs: -0.004, upstreamMs: 0.005, start: NOW - 1e-9 });
    return out;
  }

  /**
   * sluice's own logger (createLogger: its options, its redaction) writing each record as the
   * gateway does, against the same logger's pino writing accessFields as log.info: the line
   * operators' pipelines read, for a record that stands for every case.
   */
  async function compare(setUp: (log: Logger) => void = () => {}): Promise<void> {
    vi.spyOn(performance, 'now').mockReturnValue(NOW);
    vi.spyOn(Date, 'now').mockReturnValue(TIME);
    const a = sink();
    const b = sink();
    const direct = createLogger('info', a.stream);
    const reference = createLogger('info', b.stream);
    const access = createAccessLog(direct);
    const rs = records();
    const decisions: Outcome[] = ['admitted', 'unauthorized', 'free_tier_minute', 'upstream_aborted'];
    for (const [i, r] of rs.entries()) {
      // After the first line: the bindings as they are when each line is written.
      if (i === 1) {
        setUp(direct);
        setUp(reference);
      }
      const d = decisions[i % decisions.length]!;
      access(r, d);
      pinoLine(reference, r, d, Math.round((NOW - r.start) * 100) / 100);
      await nextTurn();
    }
    const got = a.text().split('\n');
    const want = b.text().split('\n');
    expect(got).toHaveLength(rs.length + 1);
    // Field for field, in order, as a pipeline reads them; then byte for byte.
    got.forEach((line, i) => {
      if (line === '') return;
      const g = JSON.parse(line) as Record<string, unknown>;
      const w = JSON.parse(want[i]!) as Record<string, unknown>;
      expect(Object.entries(g), `record ${i}`).toEqual(Object.entries(w));
      expect(line, `record ${i}`).toBe(want[i]);
    });
    expect(a.text()).toBe(b.text());
  }

  it('writes exactly the line pino writes for the same record, every field and client string', async () => {
    await compare();
  });

  it('writes exactly the line pino writes with bindings set on the logger while it writes', async () => {
    await compare((log) => log.setBindings({ replica: 'r-1', odd: 'q"\\\ud800' }));
  });

  it('builds the line itself on sluice’s own logger, without log.info, at the end of the turn', async () => {
    const a = sink();
    const log = createLogger('info', a.stream);
    const info = vi.spyOn(log, 'info');
    createAccessLog(log)(base, 'admitted');
    expect(a.text()).toBe('');
    await nextTurn();
    expect(info).not.toHaveBeenCalled();
    expect(JSON.parse(a.text())).toMatchObject({ level: 30, svc: 'sluice', reqId: 'req-1', msg: 'request' });
  });

  it('writes onto the logger’s own destination, in order, after the turn’s other lines; a flush builds what waits', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sluice-access-')), 'out.log');
    const dest = logDestination(file);
    const log = createLogger('info', dest);
    const access = createAccessLog(log);
    log.info('before');
    access(base, 'admitted');
    log.warn('after');
    access({ ...base, id: 'req-2' }, 'unauthorized');
    await new Promise<void>((resolve, reject) => log.flush((err) => (err ? reject(err) : resolve())));
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string; reqId?: string });
    expect(lines.map((l) => l.reqId ?? l.msg)).toEqual(['before', 'after', 'req-1', 'req-2']);
    dest.sink.destroy();
  });

  it('escapes a lone surrogate, so the line stays valid JSON that reads back as sent', async () => {
    const a = sink();
    const odd = 'gpt-\ud800-x';
    createAccessLog(createLogger('info', a.stream))({ ...base, model: odd }, 'admitted');
    await nextTurn();
    expect(a.text()).toContain('\\ud800');
    expect((JSON.parse(a.text()) as { model: string }).model).toBe(odd);
  });

  it('carries a child logger’s bindings and the configured level', () => {
    const a = sink();
    const log = createLogger('info', a.stream).child({ replica: 'r-1' });
    createAccessLog(log)(base, 'admitted');
    const line = JSON.parse(a.text()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, svc: 'sluice', replica: 'r-1', reqId: 'req-1', decision: 'admitted', msg: 'request' });
    expect(typeof line.time).toBe('string');
    a.clear();
    log.level = 'warn';
    createAccessLog(log)(base, 'admitted');
    expect(a.text()).toBe('');
  });

  it('carries bindings set on the logger after it was created', async () => {
    const a = sink();
    const log = createLogger('info', a.stream);
    const access = createAccessLog(log);
    log.setBindings({ replica: 'r-2' });
    access(base, 'admitted');
    await nextTurn();
    expect(JSON.parse(a.text())).toMatchObject({ svc: 'sluice', replica: 'r-2', reqId: 'req-1' });
  });

  it('follows a level changed after it was created (config reload)', async () => {
    const a = sink();
    const log = createLogger('warn', a.stream);
    const access = createAccessLog(log);
    access(base, 'admitted');
    await nextTurn();
    expect(a.text()).toBe('');
    log.level = 'info';
    access(base, 'admitted');
    await nextTurn();
    expect(JSON.parse(a.text())).toMatchObject({ reqId: 'req-1' });
  });

  it('leaves the line to pino when the logger would change it (redaction, serializers, mixin, hooks)', () => {
    vi.spyOn(performance, 'now').mockReturnValue(NOW);
    const variants: LoggerOptions[] = [
      { redact: ['ip'] },
      { redact: ['*'] },
      { serializers: { path: (p: string) => p.toUpperCase() } },
      { mixin: () => ({ zone: 'z1' }) },
      { hooks: { streamWrite: (s: string) => s.replace('POST', 'post') } },
      { formatters: { log: (o: Record<string, unknown>) => ({ ...o, formatted: true }) } },
      { messageKey: 'message' },
      { nestedKey: 'payload' },
      {
        hooks: {
          logMethod: function (this: Logger, args: Parameters<Logger['info']>, method: Logger['info']) {
            method.apply(this, [{ hooked: true }, ...args.slice(1)] as never);
          },
        },
      },
      { msgPrefix: '[gw] ' },
    ];
    for (const v of variants) {
      const { direct, reference, a, b } = pair(v);
      direct(base, 'ip_limited');
      pinoLine(reference, base, 'ip_limited', 12.35);
      expect(a.text(), JSON.stringify(Object.keys(v))).toBe(b.text());
    }
  });

  it('leaves the line to pino on a stream that routes by level (multistream)', () => {
    vi.spyOn(performance, 'now').mockReturnValue(NOW);
    const info = sink();
    const errors = sink();
    const log = pino(
      { base: null, timestamp: false },
      pino.multistream([
        { level: 'info', stream: info.stream },
        { level: 'error', stream: errors.stream },
      ]),
    );
    createAccessLog(log)(base, 'admitted');
    expect(JSON.parse(info.text())).toMatchObject({ reqId: 'req-1', msg: 'request' });
    expect(errors.text()).toBe('');
  });

  it('leaves the line to pino in a child logger with a message prefix', () => {
    const a = sink();
    const log = createLogger('info', a.stream).child({}, { msgPrefix: '[gw] ' });
    createAccessLog(log)(base, 'admitted');
    expect(JSON.parse(a.text())).toMatchObject({ msg: '[gw] request' });
  });
});

describe('accessLog setting', () => {
  it('all: every request; errors: anything not admitted, a status of 400 or more, or no answer; off: none', () => {
    const statuses = [200, 204, 304, 399, 400, 401, 429, 499, 502, undefined];
    expect(statuses.map((st) => wantsAccessLine('all', 'admitted', st))).toEqual(statuses.map(() => true));
    expect(statuses.map((st) => wantsAccessLine('errors', 'admitted', st))).toEqual([false, false, false, false, true, true, true, true, true, true]);
    expect(statuses.map((st) => wantsAccessLine('off', 'admitted', st))).toEqual(statuses.map(() => false));
    // A stream either side cut after a 200: not admitted in the end, so kept.
    expect((['upstream_aborted', 'client_aborted'] as const).map((d) => wantsAccessLine('errors', d, 200))).toEqual([true, true]);
    expect(wantsAccessLine('off', 'upstream_aborted', 200)).toBe(false);
  });
});

describe('keys in the logged path', () => {
  const sluiceKey = 'sk-Zq3xVb7_Kp0-mW2rTy8uLs5nHd4cFg6jEa1oIi9vBk0eQw3z';
  const relayKey = 'aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5hJ7kL9mN1pQ3';

  it('redacts a key written into the path, with or without its sk-, wherever the segment is', () => {
    expect(redactPath(`/${sluiceKey}/v1/models`)).toBe('/[redacted]/v1/models');
    expect(redactPath(`/v1/${relayKey}/chat/completions`)).toBe('/v1/[redacted]/chat/completions');
    expect(redactPath(`/SK-${relayKey}`)).toBe('/[redacted]');
    expect(redactPath(`/sk-abcdefghijklmnop/v1/models`)).toBe('/[redacted]/v1/models');
    // A key's body as the model of a Gemini path, before its action.
    expect(redactPath(`/v1beta/models/${relayKey}:generateContent`)).toBe('/v1beta/models/[redacted]:generateContent');
    // With a channel suffix, after a Bearer (encoded or not), or before an extension.
    expect(redactPath(`/v1beta/models/${relayKey}-3:generateContent`)).toBe('/v1beta/models/[redacted]:generateContent');
    expect(redactPath(`/Bearer%20${sluiceKey}/v1/models`)).toBe('/Bearer%20[redacted]/v1/models');
    expect(redactPath(`/Bearer ${sluiceKey}/v1/models`)).toBe('/Bearer [redacted]/v1/models');
    expect(redactPath(`/v1/${relayKey}.json`)).toBe('/v1/[redacted].json');
  });

  it('leaves ordinary paths and model ids alone', () => {
    for (const p of [
      '/v1/chat/completions',
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      '/v1/models/claude-3-7-sonnet-20250219-thinking',
      '/v1/engines/text-embedding-3-large/embeddings',
      '/api/usage/token/',
      '/v1beta/models/Meta-Llama-3.1-405B-Instruct-Turbo:generateContent',
      '/v1beta/models/Qwen2-VL-72B-Instruct-GPTQ-Int4-AWQ:generateContent',
      '/sk-short',
      '/v1/models/task-disk-risk-ask-0123456789abcdefghij',
    ]) {
      expect(redactPath(p)).toBe(p);
    }
  });

  /** The access line of `r` as sluice's own logger writes it and as pino (with redaction) writes it. */
  async function bothLines(r: AccessRecord, decision: Outcome): Promise<Array<Record<string, unknown>>> {
    const a = sink();
    const b = sink();
    createAccessLog(createLogger('info', a.stream))(r, decision);
    createAccessLog(pino({ redact: ['ip'] }, b.stream))(r, decision);
    await nextTurn();
    return [a.text(), b.text()].map((text) => {
      expect(text).not.toContain(sluiceKey.slice(3));
      expect(text).not.toContain(relayKey);
      return JSON.parse(text) as Record<string, unknown>;
    });
  }

  it('never writes a key from the path into the access line, direct or through pino', async () => {
    for (const line of await bothLines({ ...base, path: `/${sluiceKey}/v1/models` }, 'unauthorized')) expect(line.path).toBe('/[redacted]/v1/models');
  });

  it('never writes a key sent as the model (SDK arguments swapped), direct or through pino; real model ids stay', async () => {
    for (const line of await bothLines({ ...base, model: sluiceKey }, 'admitted')) expect(line.model).toBe('[redacted]');
    // The contract's `sk-` is optional: a key's body alone is a key too.
    for (const line of await bothLines({ ...base, model: relayKey }, 'admitted')) expect(line.model).toBe('[redacted]');
    // White space or a Bearer around it.
    for (const m of [` ${sluiceKey}`, `Bearer ${sluiceKey}`, `${relayKey}\n`, `bearer  ${relayKey}`, `${relayKey}${' '.repeat(300)}`]) {
      expect(loggedModel(m), JSON.stringify(m)).toBe('[redacted]');
    }
    for (const m of [
      'gpt-4o-mini',
      'Qwen2-VL-72B-Instruct-GPTQ-Int4-AWQ',
      'sk-short',
      'skills-model',
      'Meta-Llama-3.1-405B-Instruct-Turbo',
      'claude3opus20240229thinkingmaxlong',
    ]) {
      expect(loggedModel(m)).toBe(m);
    }
  });
});

describe('fields taken from the request are bounded', () => {
  it('logs a value over LOGGED_FIELD_MAX_CHARS as its first characters and the whole length, in at most that many characters', () => {
    const long = 'm'.repeat(7_900_000);
    const cut = boundLogged(long);
    expect(cut.length).toBeLessThanOrEqual(LOGGED_FIELD_MAX_CHARS);
    expect(cut).toMatch(/^m+…\[cut, 7900000 chars\]$/);
    // Bounding again changes nothing; a value at the bound is whole.
    expect(boundLogged(cut)).toBe(cut);
    const edge = 'e'.repeat(LOGGED_FIELD_MAX_CHARS);
    expect(boundLogged(edge)).toBe(edge);
    expect(boundLogged(edge + 'e')).toMatch(/…\[cut, 257 chars\]$/);
  });

  it('never cuts between the halves of a surrogate pair', () => {
    for (let pad = 0; pad < 4; pad++) {
      const cut = boundLogged('a'.repeat(pad) + '🚀'.repeat(400));
      expect((cut as string & { isWellFormed(): boolean }).isWellFormed()).toBe(true);
    }
  });

  it('cuts the path after redacting it, and the model, in the access line', () => {
    const key = 'sk-' + 'Ab1'.repeat(16);
    const fields = accessFields({ ...base, path: `/${key}/` + 'p'.repeat(1000), model: 'x'.repeat(5000) }, 'admitted', 1);
    expect(fields.path).toMatch(/^\/\[redacted\]\/p+…\[cut, 1012 chars\]$/);
    expect(fields.model).toMatch(/^x+…\[cut, 5000 chars\]$/);
  });
});
