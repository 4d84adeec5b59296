import { describe, expect, it } from 'vitest';
import { newRequestId } from './request-id.js';

describe('newRequestId', () => {
  it('is the UTC timestamp to the millisecond, then 13 random letters and digits', () => {
    const id = newRequestId(Date.UTC(2026, 10, 24, 3, 4, 5, 67));
    expect(id).toMatch(/^20261124030405067[A-Za-z0-9]{13}$/);
  });

  it('never repeats across many ids in one millisecond', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5000; i++) ids.add(newRequestId(1_700_000_000_000));
    expect(ids.size).toBe(5000);
    for (const id of ids) expect(id).toMatch(/^\d{17}[A-Za-z0-9]{13}$/);
  });

  it('uses the whole alphabet, not a slice of it', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) for (const c of newRequestId(0).slice(17)) seen.add(c);
    expect(seen.size).toBe(62);
  });
});
