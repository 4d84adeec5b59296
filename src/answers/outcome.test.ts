import { describe, expect, it } from 'vitest';
import { OUTCOMES } from './outcome.js';

describe('outcomes', () => {
  it('are spelled once each, in the snake_case operators match on (metric label, access line)', () => {
    expect(new Set(OUTCOMES).size).toBe(OUTCOMES.length);
    for (const o of OUTCOMES) expect(o).toMatch(/^[a-z]+(?:_[a-z]+)*$/);
  });
});
