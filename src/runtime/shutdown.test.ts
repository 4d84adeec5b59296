import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { closeInOrder } from './shutdown.js';

/** A logger whose lines (parsed) the test reads. */
function capturedLog(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

describe('closeInOrder', () => {
  it('runs the steps in order; one that hangs or fails is logged and the next still runs', async () => {
    const { log, lines } = capturedLog();
    const ran: string[] = [];
    const started = performance.now();
    await closeInOrder(
      [
        { name: 'first', run: () => void ran.push('first') },
        { name: 'hangs', run: () => new Promise(() => ran.push('hangs')) },
        {
          name: 'fails',
          run: async () => {
            ran.push('fails');
            throw new Error('no connection');
          },
        },
        { name: 'last', run: async () => void ran.push('last') },
      ],
      log,
      100,
    );
    expect(ran).toEqual(['first', 'hangs', 'fails', 'last']);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(lines.map((l) => [l.step, l.msg])).toEqual([
      ['first', 'closed'],
      ['hangs', 'close step did not finish in time; going on'],
      ['fails', 'close step failed; going on'],
      ['last', 'closed'],
    ]);
    expect(lines[2]!.err).toBe('no connection');
  });
});
