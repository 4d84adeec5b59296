import { describe, expect, it } from 'vitest';
import { capturedLog } from '../../test/support/log.js';
import { closeInOrder } from './shutdown.js';

describe('closeInOrder', () => {
  it('runs the steps in order; one that hangs or fails is logged and the next still runs', async () => {
    const { log, lines } = capturedLog('debug');
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
