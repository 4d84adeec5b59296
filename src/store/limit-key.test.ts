import { describe, expect, it } from 'vitest';
import { limitKey } from './limit-key.js';
import { MemoryStore } from './memory.js';

describe('limitKey', () => {
  it("makes the subject the key's hash tag, so a subject's counts share one Redis Cluster slot", () => {
    expect(limitKey({ kind: 'window', subject: 'u:alice', key: 'ft:w', limit: 1, windowMs: 1000 })).toBe('{u:alice}:ft:w');
    expect(limitKey({ kind: 'counter', subject: 'ip:::1', key: 'usage', limit: 1, resetAtMs: 0 })).toBe('{ip:::1}:usage');
    expect(limitKey({ kind: 'window', key: 'plain', limit: 1, windowMs: 1000 })).toBe('plain');
  });

  it('keeps the counts of two subjects apart under the same name', async () => {
    const s = new MemoryStore();
    const check = (subject: string) => [{ kind: 'window', subject, key: 'ft:w', limit: 1, windowMs: 60_000 }] as const;
    expect((await s.consume(check('u:a'), 1000, 'm1')).admitted).toBe(true);
    expect((await s.consume(check('u:b'), 1000, 'm2')).admitted).toBe(true);
    expect((await s.consume(check('u:a'), 1000, 'm3')).admitted).toBe(false);
  });
});
