import { describe, expect, it } from 'vitest';
import { missingNodeFlags, NODE_FLAGS } from './node-flags.js';

describe('missingNodeFlags', () => {
  it('names every flag a process was started without, with what running without it costs', () => {
    const missing = missingNodeFlags(['--import', 'tsx', '--expose-gc', '--max-semi-space-size=16']);
    expect(missing.map((m) => m.flag)).toEqual(['--no-memory-reducer']);
    expect(missing[0]!.without).toContain('slower');
    expect(missingNodeFlags(['--import', 'tsx']).map((m) => m.flag)).toEqual([...NODE_FLAGS]);
  });

  it('names none when each is given, in either of the spellings V8 accepts', () => {
    expect(missingNodeFlags([...NODE_FLAGS, '--import', 'tsx'])).toEqual([]);
    expect(missingNodeFlags(NODE_FLAGS.map((f) => f.replace(/-/g, '_').replace(/^__/, '--')))).toEqual([]);
  });

  it('reads NODE_OPTIONS too, where V8 takes --max-semi-space-size', () => {
    const before = process.env.NODE_OPTIONS;
    try {
      process.env.NODE_OPTIONS = '--max-semi-space-size=16';
      expect(missingNodeFlags().map((m) => m.flag)).not.toContain('--max-semi-space-size=16');
      delete process.env.NODE_OPTIONS;
      expect(missingNodeFlags().map((m) => m.flag)).toContain('--max-semi-space-size=16');
    } finally {
      if (before === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = before;
    }
  });

  it('takes a flag given with another value as given: the operator chose it', () => {
    expect(missingNodeFlags(['--no-memory-reducer', '--expose-gc', '--max-semi-space-size=64'])).toEqual([]);
    expect(missingNodeFlags(['--no-memory-reducer', '--expose-gc']).map((m) => m.flag)).toEqual(['--max-semi-space-size=16']);
  });
});
