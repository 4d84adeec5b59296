/**
 * sluice's own logger (createLogger: its options, redaction included, and the access line built as
 * in production) writing to lines a test reads, parsed.
 */
import { Writable } from 'node:stream';
import type pino from 'pino';
import { createLogger } from '../../src/log/index.js';

export interface CapturedLog {
  log: pino.Logger;
  lines: Array<Record<string, unknown>>;
  /** Every line as written, for "this text appears nowhere" checks. */
  text(): string;
  /** The access lines (`msg: "request"`). */
  requests(): Array<Record<string, unknown>>;
  /** Forgets every line read so far (a test's own lines from here on). */
  clear(): void;
}

export function capturedLog(level = 'info'): CapturedLog {
  const raw: string[] = [];
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger(
    level,
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n')) {
          if (!l) continue;
          raw.push(l);
          lines.push(JSON.parse(l) as Record<string, unknown>);
        }
        cb();
      },
    }),
  );
  return {
    log,
    lines,
    text: () => raw.join('\n'),
    requests: () => lines.filter((l) => l.msg === 'request'),
    clear: () => {
      raw.length = 0;
      lines.length = 0;
    },
  };
}
