import { describe, expect, it } from 'vitest';
import { missingNodeFlags, NODE_FLAGS } from './node-flags.js';

describe('missingNodeFlags', () => {
  it('names every flag a process was started without', () => {
    expect(missingNodeFlags(['--import', 'tsx'])).toEqual([...NODE_FLAGS]);
  });

  it('names none when each is given, in either of the spellings V8 accepts', () => {
    expect(missingNodeFlags([...NODE_FLAGS, '--import', 'tsx'])).toEqual([]);
    expect(missingNodeFlags(NODE_FLAGS.map((f) => f.replace(/-/g, '_').replace(/^__/, '--')))).toEqual([]);
  });
});
